"""AdamW, LAMB and SGD with decoupled weight decay, for a loop that all-reduces itself.

The trainer sums gradients across replicas itself (it needs the summed gradients for
global-norm clipping and the finiteness check) and then calls
`Optimizer.apply_gradients` with gradients that are identical on every replica.
A Keras optimizer would all-reduce them a second time: Keras 3's `apply_gradients`
called inside `strategy.run` sums the gradients across replicas (tests/training/test_optimizers.py
checks this), so it fits a loop that hands it per-replica gradients and clips nothing
globally, which is not ours.

Which variables are decayed is decided by the variable's path (`embeddings/layer_norm/
gamma`, `transformer_layer_0/attention/query/bias`), not its short name, so that
"layer_norm" in the exclusion list excludes every LayerNorm's gamma and beta.

The whole update of every variable (gradient scaling, moments, bias correction, decay,
the writes, in place) is one XLA-compiled function per replica and step: unfused,
TensorFlow runs about fifteen element-wise kernels per variable, each a full pass over
memory, which on a CPU costs as much as a sizeable part of the forward pass; and one
launch per variable, each behind its own `tf.cond`, is some two hundred launches and
conditionals per replica and step at BERT-base, each conditional a device-to-host read
of its predicate on a GPU. A skipped (non-finite) step is the same launch with every
change multiplied by zero, so that nothing leaves the device.
"""

from typing import Callable, Dict, Iterable, List, Sequence, Tuple

import tensorflow as tf

from bert_tf import configs
from bert_tf.training.keras_optimizers import uses_weight_decay
from bert_tf.training.schedules import WarmupPolynomialDecay

ALGORITHMS = ("adamw", "lamb", "sgd")


def variable_path(variable) -> str:
  """The variable's path in its model (`embeddings/layer_norm/gamma`)."""
  path = getattr(variable, "path", None)
  if path:
    return path
  return variable.name.split(":")[0]


def _tf_variable(variable):
  """The tf.Variable (possibly distributed) behind a Keras variable."""
  value = getattr(variable, "value", None)
  if isinstance(value, tf.Variable):
    return value
  return variable


class Optimizer(tf.Module):
  """A first-order optimizer with decoupled weight decay and a step-indexed schedule.

  Algorithms:
    adamw: Adam with bias correction; update = m^/(sqrt(v^)+eps) + wd * w.
    lamb:  the same update scaled per variable by the trust ratio ||w|| / ||update||
           (1 where either norm is 0, and for variables excluded from weight decay).
    sgd:   update = g + wd * w.
  All: w <- w - lr(step) * update (* trust ratio).

  Slots (`m`, `v`) are created by `build` under the strategy's scope, mirrored like
  the variables, and tracked by variable path so that checkpoints name them.
  """

  def __init__(self, algorithm: str, learning_rate: Callable, weight_decay_rate: float = 0.0,
               exclude_from_weight_decay: Sequence[str] = (), beta_1: float = 0.9,
               beta_2: float = 0.999, epsilon: float = 1e-6, jit_compile: bool = True,
               name: str = "optimizer"):
    super().__init__(name=name)
    if algorithm not in ALGORITHMS:
      raise ValueError(f"algorithm must be one of {ALGORITHMS}, got '{algorithm}'")
    self.algorithm = algorithm
    self.learning_rate = learning_rate
    self.weight_decay_rate = float(weight_decay_rate)
    self.exclude_from_weight_decay = tuple(exclude_from_weight_decay)
    self.beta_1 = float(beta_1)
    self.beta_2 = float(beta_2)
    self.epsilon = float(epsilon)
    self.jit_compile = bool(jit_compile)
    self.slots: Dict[str, Dict[str, tf.Variable]] = {}
    self._built = False
    # Set past tf.Module's attribute tracking: a tracked dict with bool keys makes
    # every checkpoint save fail, and the functions hold no state to save.
    object.__setattr__(self, "_update_fns", {})

  @property
  def slot_names(self) -> List[str]:
    return [] if self.algorithm == "sgd" else ["m", "v"]

  def decays(self, variable) -> bool:
    """Whether `variable` gets weight decay (and, for LAMB, the trust ratio)."""
    return self.weight_decay_rate > 0 and uses_weight_decay(
        variable_path(variable), self.exclude_from_weight_decay)

  def build(self, variables: Iterable) -> None:
    """Creates the slots of `variables`; call under the strategy's scope."""
    if self._built:
      return
    strategy = tf.distribute.get_strategy()
    slots = {}
    for variable in variables:
      path = variable_path(variable)
      if path in slots:
        raise ValueError(f"Two trainable variables share the path '{path}'")
      tf_var = _tf_variable(variable)
      with strategy.extended.colocate_vars_with(tf_var):
        slots[path] = {
            name: tf.Variable(tf.zeros(variable.shape, tf.float32), trainable=False,
                              name=f"{path.replace('/', '.')}.{name}")
            for name in self.slot_names
        }
    self.slots = slots
    self._built = True

  def apply_gradients(self, grads: Sequence[tf.Tensor], variables: Sequence, step,
                      should_apply=True, gradient_scale=None, step_counter=None) -> None:
    """Updates `variables` from `grads`.

    Call inside `strategy.run` (replica context) with gradients that are already
    summed across replicas, or outside any strategy. Each replica updates its own copy
    of every variable and slot with the same values, without a merge_call.

    Args:
      grads: float32 tensors, one per variable, equal on every replica.
      variables: the model's trainable variables (Keras or tf variables).
      step: int scalar, the number of updates before this one (for the schedule and
        Adam's bias correction).
      should_apply: bool scalar; where False, variables and slots keep their values
        (a step skipped because of non-finite gradients).
      gradient_scale: optional float32 scalar every gradient is multiplied by first
        (loss-scale removal and global-norm clipping, folded into the update so that
        they cost no pass of their own over the gradients).
      step_counter: optional int64 variable that the same launch increments by one,
        skipped step or not.
    """
    if not self._built:
      raise RuntimeError("Optimizer.build(variables) must run before apply_gradients")
    lr = tf.cast(self.learning_rate(step), tf.float32)
    t = tf.cast(step, tf.float32) + 1.0
    should_apply = tf.convert_to_tensor(should_apply, tf.bool)
    scale = tf.constant(1.0) if gradient_scale is None else tf.cast(gradient_scale,
                                                                      tf.float32)
    # Resource handles, not variables: in replica context a distributed variable's
    # handle is this replica's copy, and a compiled function handed the variables
    # themselves gave same-shaped variables wrong updates under MirroredStrategy
    # (tests/training/test_optimizers.py).
    handles, dtypes, decays = [], [], []
    for variable in variables:
      slots = self.slots[variable_path(variable)]
      for owned in (_tf_variable(variable), *(slots[name] for name in self.slot_names)):
        handles.append(owned.handle)
        dtypes.append(owned.dtype)
      decays.append(self.decays(variable))
    counters = [] if step_counter is None else [_tf_variable(step_counter).handle]
    update = self._update_fn(tuple(dtypes), tuple(decays))
    update(handles, counters, [tf.convert_to_tensor(g) for g in grads], lr, t,
           should_apply, scale)

  def _update_fn(self, dtypes: Tuple[tf.DType, ...], decays: Tuple[bool, ...]):
    """The update of every variable: one (XLA-compiled) function that reads each
    variable and its slots and writes their new values back in place. In place matters
    on a CPU, where the update is a pass over memory: a function returning new values
    that `assign` then installs writes fresh buffers for every variable and slot.

    Args:
      dtypes: the dtype of each handle (variable, then its slots, per variable).
      decays: per variable, whether it gets weight decay.
    """
    key = (dtypes, decays)
    if key not in self._update_fns:
      per_variable = 1 + len(self.slot_names)

      def write_new_values(handles, counters, grads, lr, t, should_apply, scale):
        for counter in counters:
          tf.raw_ops.AssignAddVariableOp(resource=counter, value=tf.constant(1, tf.int64))
        for i, (grad, decay) in enumerate(zip(grads, decays)):
          owned = handles[i * per_variable:(i + 1) * per_variable]
          values = [tf.raw_ops.ReadVariableOp(resource=handle, dtype=dtype) for handle, dtype
                    in zip(owned, dtypes[i * per_variable:(i + 1) * per_variable])]
          new = self._new_values(values[0], grad, lr, t, scale, *values[1:], decay=decay,
                                 should_apply=should_apply)
          for handle, value in zip(owned, new):
            tf.raw_ops.AssignVariableOp(resource=handle, value=value)

      if self.jit_compile:
        write_new_values = tf.function(write_new_values, jit_compile=True)
      self._update_fns[key] = write_new_values
    return self._update_fns[key]

  def _new_values(self, var, grad, lr, t, scale, *slots, decay: bool, should_apply=True):
    """(new var, *new slots) as tensors, from the current values; where should_apply
    is False, the current values.

    A skipped step is arithmetic, not a choice between new and old values: its
    gradient is taken as zero and every change multiplied by zero, which leaves each
    value as it was. XLA then updates in place as on an applied step; a select of the
    old values (or a conditional) made it write copies, at 1.7 times the update's CPU
    time (BERT-mini, 78 variables).
    """
    applied = tf.cast(should_apply, tf.float32)
    # After the scale, which a non-finite gradient norm makes non-finite too.
    grad = tf.where(should_apply, tf.cast(grad, tf.float32) * scale, 0.0)
    new_slots = []
    if self.algorithm == "sgd":
      update = grad
    else:
      m, v = slots
      new_m = m + applied * (1.0 - self.beta_1) * (grad - m)
      new_v = v + applied * (1.0 - self.beta_2) * (tf.square(grad) - v)
      m_hat = new_m / (1.0 - tf.pow(self.beta_1, t))
      v_hat = new_v / (1.0 - tf.pow(self.beta_2, t))
      update = m_hat / (tf.sqrt(v_hat) + self.epsilon)
      new_slots = [new_m, new_v]
    if decay:
      update += self.weight_decay_rate * var
    if self.algorithm == "lamb" and decay:
      w_norm = tf.norm(var)
      u_norm = tf.norm(update)
      ratio = tf.where((w_norm > 0) & (u_norm > 0), w_norm / tf.maximum(u_norm, 1e-30), 1.0)
      update *= ratio
    return (var - (applied * lr) * update, *new_slots)


def build_optimizer(config: configs.OptimizerConfig, train_steps: int,
                    jit_compile: bool = True) -> Optimizer:
  """The optimizer and schedule an OptimizerConfig describes.

  decay_steps 0 means train_steps: the rate reaches end_learning_rate at the last step.
  jit_compile: XLA-compile the update (False on a TPU, which compiles the whole step).
  """
  decay_steps = config.decay_steps or train_steps
  schedule = WarmupPolynomialDecay(config.learning_rate, config.warmup_steps, decay_steps,
                                   config.end_learning_rate, config.power)
  return Optimizer(config.type, schedule, weight_decay_rate=config.weight_decay_rate,
                   exclude_from_weight_decay=config.exclude_from_weight_decay,
                   beta_1=config.beta_1, beta_2=config.beta_2, epsilon=config.epsilon,
                   jit_compile=jit_compile)
