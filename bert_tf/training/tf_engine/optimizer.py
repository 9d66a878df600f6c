"""The TensorFlow engine's optimizer: the update rule both engines share
(bert_tf.training.update_rule: AdamW, LAMB, SGD) applied in place, in one XLA launch,
by a loop that all-reduces itself.

The trainer sums gradients across replicas itself (it needs the summed gradients for
global-norm clipping and the finiteness check) and then calls
`Optimizer.apply_gradients` with gradients that are identical on every replica.
A Keras optimizer would all-reduce them a second time: Keras 3's `apply_gradients`
called inside `strategy.run` sums the gradients across replicas (tests/training/test_optimizers.py
checks this), so it fits a loop that hands it per-replica gradients and clips nothing
globally, which is not ours.

The whole update of every variable (gradient scaling, moments, bias correction, decay,
the writes, in place) is one XLA-compiled function per replica and step: unfused,
TensorFlow runs about fifteen element-wise kernels per variable, each a full pass over
memory, which on a CPU costs as much as a sizeable part of the forward pass; and one
launch per variable, each behind its own `tf.cond`, is some two hundred launches and
conditionals per replica and step at BERT-base, each conditional a device-to-host read
of its predicate on a GPU. A skipped (non-finite) step is the same launch with every
change multiplied by zero, so that nothing leaves the device.

State: the moments are tf.Variables tracked as `slots[<variable path>][<m|v>]` (so
TensorFlow checkpoints key them `optimizer/slots/<path, / written .S>/m`), the update
count is the trainer's step, the loss scale a DynamicLossScale's; `state_variables`
names them all as the JAX engine does (update_rule's layout), for portable checkpoints.
"""

from typing import Dict, Iterable, List, Sequence, Tuple

import tensorflow as tf

from bert_tf import configs
from bert_tf import constants
from bert_tf.training.update_rule import UpdateRule, build_update_rule, slot_name

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
  """An UpdateRule's optimizer on tf.distribute: slots mirrored like the variables,
  the update of every variable one compiled launch per replica.

  Args:
    rule: the update rule (algorithm, schedule, weight decay, Adam's constants).
    jit_compile: XLA-compile the update (False on a TPU, which compiles the whole step).

  Slots (`m`, `v`) are created by `build` under the strategy's scope, mirrored like
  the variables, and tracked by variable path so that checkpoints name them.
  """

  def __init__(self, rule: UpdateRule, jit_compile: bool = True, name: str = "optimizer"):
    super().__init__(name=name)
    self.rule = rule
    self.jit_compile = bool(jit_compile)
    self.slots: Dict[str, Dict[str, tf.Variable]] = {}
    self._built = False
    # Set past tf.Module's attribute tracking: a tracked dict with bool keys makes
    # every checkpoint save fail, and the functions hold no state to save.
    object.__setattr__(self, "_update_fns", {})

  @property
  def algorithm(self) -> str:
    return self.rule.algorithm

  def learning_rate(self, step) -> tf.Tensor:
    """The rate of the update after `step` updates (float32 scalar)."""
    return tf.cast(self.rule.learning_rate(step), tf.float32)

  @property
  def slot_names(self) -> List[str]:
    return list(self.rule.slot_names)

  def decays(self, variable) -> bool:
    """Whether `variable` gets weight decay (and, for LAMB, the trust ratio)."""
    return self.rule.decays(variable_path(variable))

  def state_variables(self, step: tf.Variable, loss_scale=None) -> Dict[str, tf.Variable]:
    """The optimizer state under the names both engines use (update_rule's layout), for
    portable checkpoints: every slot (`m/<variable path>`), the trainer's `step` as the
    update count and, under mixed_float16, the DynamicLossScale's variables."""
    state = {constants.OPTIMIZER_COUNT: step}
    state.update({slot_name(name, path): slot for path, slots in self.slots.items()
                  for name, slot in slots.items()})
    if loss_scale is not None:
      state[constants.LOSS_SCALE] = loss_scale.scale
      state[constants.LOSS_SCALE_GOOD_STEPS] = loss_scale.good_steps
    return state

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
    lr, t = self.rule.step_values(step)
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
          new = self.rule.new_values(values[0], grad, values[1:], lr, t, scale,
                                     should_apply, decay)
          for handle, value in zip(owned, new):
            tf.raw_ops.AssignVariableOp(resource=handle, value=value)

      if self.jit_compile:
        write_new_values = tf.function(write_new_values, jit_compile=True)
      self._update_fns[key] = write_new_values
    return self._update_fns[key]


def build_optimizer(config: configs.OptimizerConfig, train_steps: int,
                    jit_compile: bool = True) -> Optimizer:
  """The optimizer an OptimizerConfig describes (update_rule.build_update_rule).

  jit_compile: XLA-compile the update (False on a TPU, which compiles the whole step).
  """
  return Optimizer(build_update_rule(config, train_steps), jit_compile=jit_compile)
