"""Dynamic loss scaling for mixed_float16, as one rule both engines run (keras.ops; the
TensorFlow engine's DynamicLossScale, bert_tf.training.tf_engine.loss_scale, and the
JAX engine's optimizer, bert_tf.training.jax_engine.optimizer, keep its state). Imports no TensorFlow.

The loss is multiplied by the scale before the backward pass and the gradients divided
by it. A step whose loss or gradients are not finite (a float16 overflow in the forward
or the backward pass) is skipped and halves the scale, down to MIN_SCALE;
`growth_interval` finite steps in a row double it. A fixed scale never changes.
"""

from keras import ops

# The smallest scale: halving stops there.
MIN_SCALE = 1.0


class LossScaleRule:
  """How the loss scale moves.

  Args:
    initial_scale: the scale of the first step.
    growth_interval: finite steps in a row after which the scale doubles.
    factor: the growth and shrink factor.
    dynamic: False for a fixed scale.
  """

  def __init__(self, initial_scale: float = 2.0 ** 15, growth_interval: int = 2000,
               factor: float = 2.0, dynamic: bool = True):
    self.initial_scale = float(initial_scale)
    self.growth_interval = int(growth_interval)
    self.factor = float(factor)
    self.dynamic = bool(dynamic)

  @classmethod
  def from_string(cls, value: str) -> "LossScaleRule":
    """'dynamic' for a dynamic scale, or a number for a fixed one (runtime.loss_scale)."""
    if value == "dynamic":
      return cls()
    try:
      scale = float(value)
    except ValueError:
      raise ValueError(f"runtime.loss_scale must be 'dynamic' or a number, got '{value}'"
                       ) from None
    if scale <= 0:
      raise ValueError(f"runtime.loss_scale must be positive, got {scale}")
    return cls(initial_scale=scale, dynamic=False)

  def can_lower(self, scale):
    """Whether a non-finite step at `scale` (float32 scalar) lowers the scale: bool
    scalar, False for a fixed scale and at MIN_SCALE."""
    return ops.logical_and(self.dynamic, scale > MIN_SCALE)

  def next(self, scale, good_steps, step_finite):
    """(scale, good_steps) after a step: halved after a non-finite step, doubled after
    growth_interval finite steps in a row; unchanged for a fixed scale.

    Args:
      scale: float32 scalar; good_steps: int scalar; step_finite: bool scalar.
    """
    if not self.dynamic:
      return scale, good_steps
    good = ops.where(step_finite, good_steps + 1, ops.zeros_like(good_steps))
    grow = good >= self.growth_interval
    new_scale = ops.where(step_finite, ops.where(grow, scale * self.factor, scale),
                          ops.maximum(scale / self.factor, MIN_SCALE))
    return new_scale, ops.where(grow, ops.zeros_like(good), good)


def stops_training(loss_finite, rule: "LossScaleRule" = None, scale=None):
  """Whether a step's non-finite loss stops training (bool scalar): always without a
  loss scale; under one, only where the scale cannot go lower, since a dynamic scale
  takes a non-finite loss for a float16 overflow (the step is skipped, the scale
  halved)."""
  stops = ops.logical_not(loss_finite)
  if rule is not None:
    stops = ops.logical_and(stops, ops.logical_not(rule.can_lower(scale)))
  return stops
