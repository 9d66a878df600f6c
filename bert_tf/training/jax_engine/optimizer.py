"""The JAX engine's optimizer: the update rule both engines share
(bert_tf.training.update_rule: AdamW, LAMB, SGD) as a pure function of arrays, applied
inside the jit-compiled step (bert_tf.training.jax_engine.step). Imports no TensorFlow.

Not a Keras optimizer: the step hands it the gradients of the whole step (summed over
micro-batches and devices) so that clipping, the finiteness check and the gradient
norm see the step's gradients, and its state is the layout update_rule writes down,
keyed by variable path, the same as the TensorFlow engine's. Keras's optimizers count
accumulated micro-batches as iterations, add epsilon to sqrt(v) before bias correction,
and apply non-finite steps unless wrapped in a LossScaleOptimizer.

The state lives in Keras variables (`variables`, in `state_names` order) so that a
checkpoint saves and restores it by name (`state_variables`); the step carries their
values as arrays.

Variables that Keras marks `overwrite_with_gradient` (the float8 layers' scales and
amax histories, bert_tf.models.float8) are not trained: their "gradient" is their next
value, which replaces them; they have no moments and take no part in the gradient norm.
"""

from typing import Dict, List, Optional, Sequence, Tuple

import keras
from keras import ops

from bert_tf import configs
from bert_tf import constants
from bert_tf.training import loss_scale_rule
from bert_tf.training import steps
from bert_tf.training import update_rule
from bert_tf.training.loss_scale_rule import LossScaleRule
from bert_tf.training.update_rule import UpdateRule


class StatelessOptimizer:
  """An UpdateRule (and, under mixed_float16, a LossScaleRule) over a model's trainable
  variables, applied to arrays.

  Args:
    rule: the update rule.
    global_clipnorm: clip the step's gradients to this global norm (0: no clipping).
    loss_scale: the loss-scale rule under mixed_float16, else None.
  """

  def __init__(self, rule: UpdateRule, global_clipnorm: float = 0.0,
               loss_scale: Optional[LossScaleRule] = None):
    self.rule = rule
    self.global_clipnorm = float(global_clipnorm)
    self.loss_scale_rule = loss_scale
    self.variables: List[keras.Variable] = []
    self.state_names: List[str] = []
    self.decays: Tuple[bool, ...] = ()
    self._paths: List[str] = []
    self._overwritten: Tuple[bool, ...] = ()
    self.built = False

  def build(self, trainable_variables: Sequence) -> None:
    """Creates the state of `trainable_variables` (zero moments, count 0, the initial
    loss scale)."""
    if self.built:
      return
    paths = [variable.path for variable in trainable_variables]
    if len(set(paths)) != len(paths):
      raise ValueError("Two trainable variables share a path")
    overwritten = tuple(bool(getattr(v, "overwrite_with_gradient", False))
                        for v in trainable_variables)
    # Initializers, not values: in a keras.StatelessScope the variables stay abstract
    # (shapes and dtypes), as the ahead-of-time compile builds them.
    zeros = keras.initializers.Zeros()
    state = [(constants.OPTIMIZER_COUNT, keras.Variable(
        zeros, shape=(), dtype="int32", trainable=False, name="count"))]
    for slot in self.rule.slot_names:
      for variable, path, overwrite in zip(trainable_variables, paths, overwritten):
        if overwrite:
          continue
        state.append((update_rule.slot_name(slot, path), keras.Variable(
            zeros, shape=variable.shape, dtype="float32", trainable=False, name=slot)))
    if self.loss_scale_rule is not None:
      state.append((constants.LOSS_SCALE, keras.Variable(
          keras.initializers.Constant(self.loss_scale_rule.initial_scale), shape=(),
          dtype="float32", trainable=False, name="scale")))
      state.append((constants.LOSS_SCALE_GOOD_STEPS, keras.Variable(
          zeros, shape=(), dtype="int32", trainable=False, name="good_steps")))
    self.state_names = [name for name, _ in state]
    self.variables = [variable for _, variable in state]
    self.decays = tuple(self.rule.decays(path) for path in paths)
    self._paths = paths
    self._overwritten = overwritten
    self.built = True

  def state_variables(self) -> Dict[str, keras.Variable]:
    """{name: variable} of the state, the portable checkpoint's optimizer names."""
    return dict(zip(self.state_names, self.variables))

  def _named(self, values: Sequence) -> Dict[str, object]:
    return dict(zip(self.state_names, values))

  def loss_scale(self, values: Sequence):
    """The loss scale in the state's `values` (float32 scalar), or None."""
    if self.loss_scale_rule is None:
      return None
    return self._named(values)[constants.LOSS_SCALE]

  def apply(self, values: Sequence, trainable: Sequence, grads: Sequence, loss
            ) -> Tuple[list, list, Dict[str, object]]:
    """One update from the step's gradients: pure, for use inside jax.jit.

    Args:
      values: the state's values, in `variables` order.
      trainable: the trainable variables' values, in build's order.
      grads: their gradients, summed over the step's micro-batches and devices, times
        the loss scale under mixed_float16.
      loss: float32 scalar, the step's (unscaled) loss.

    Returns:
      (new trainable values, new state values, logs): logs are float32 scalars,
      gradient_norm (before clipping), learning_rate, skipped_steps (1 where the
      gradients or the loss were not finite and nothing but the count and loss scale
      changed), non_finite_loss_steps (1 where the loss was not finite and training
      stops, loss_scale_rule.stops_training) and, under mixed_float16, loss_scale.
    """
    state = self._named(values)
    count = state[constants.OPTIMIZER_COUNT]
    scale = self.loss_scale(values)
    grad_norm = ops.sqrt(sum(ops.sum(ops.square(ops.cast(g, "float32")))
                             for g, overwrite in zip(grads, self._overwritten)
                             if not overwrite))
    gradient_norm, factor, finite = update_rule.gradient_scale(
        grad_norm, loss, scale, self.global_clipnorm)
    lr, t = self.rule.step_values(count)
    new_trainable = []
    for var, grad, path, decay, overwrite in zip(trainable, grads, self._paths, self.decays,
                                                 self._overwritten):
      if overwrite:
        new_trainable.append(ops.where(finite, ops.cast(grad, var.dtype), var))
        continue
      names = [update_rule.slot_name(slot, path) for slot in self.rule.slot_names]
      new_var, *new_slots = self.rule.new_values(var, grad, [state[n] for n in names], lr,
                                                 t, factor, finite, decay)
      new_trainable.append(new_var)
      state.update(zip(names, new_slots))
    state[constants.OPTIMIZER_COUNT] = count + 1
    logs = {steps.GRADIENT_NORM: gradient_norm, steps.LEARNING_RATE: lr,
            steps.SKIPPED_STEPS: 1.0 - ops.cast(finite, "float32"),
            steps.NON_FINITE_LOSS_STEPS: ops.cast(loss_scale_rule.stops_training(
                ops.isfinite(loss), self.loss_scale_rule, scale), "float32")}
    if scale is not None:
      logs[steps.LOSS_SCALE] = scale
      state[constants.LOSS_SCALE], state[constants.LOSS_SCALE_GOOD_STEPS] = (
          self.loss_scale_rule.next(scale, state[constants.LOSS_SCALE_GOOD_STEPS], finite))
    return new_trainable, [state[name] for name in self.state_names], logs


def build_stateless_optimizer(config: configs.OptimizerConfig, train_steps: int,
                              trainable_variables: Sequence,
                              mixed_precision_dtype: str = "float32",
                              loss_scale: str = "dynamic") -> StatelessOptimizer:
  """The built optimizer of `config` over `trainable_variables`.

  Args:
    config: the experiment's optimizer section (decay_steps 0: train_steps).
    train_steps: trainer.train_steps.
    trainable_variables: the model's, in model.trainable_variables order.
    mixed_precision_dtype: "mixed_float16" scales the loss (runtime.loss_scale: 'dynamic'
      or a fixed number).
  """
  rule = None
  if mixed_precision_dtype == "mixed_float16":
    rule = LossScaleRule.from_string(loss_scale)
  optimizer = StatelessOptimizer(update_rule.build_update_rule(config, train_steps),
                                 config.global_clipnorm, rule)
  optimizer.build(list(trainable_variables))
  return optimizer
