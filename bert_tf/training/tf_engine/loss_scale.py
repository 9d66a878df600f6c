"""Dynamic loss scaling for mixed_float16 training.

The loss is multiplied by the scale before the backward pass and the (all-reduced)
gradients divided by it. A step whose loss or gradients are not finite (a float16
overflow in the forward or the backward pass) is skipped and halves the scale, down to
MIN_SCALE; `growth_interval` finite steps in a row double it. Every replica computes
the same decision from the same all-reduced values, so the scale stays mirrored.
"""

import tensorflow as tf

# The smallest scale: halving stops there.
MIN_SCALE = 1.0


class DynamicLossScale(tf.Module):
  """The loss scale and its count of consecutive finite steps (both checkpointed).

  Create under the strategy's scope; `update` may run in replica context.
  """

  def __init__(self, initial_scale: float = 2.0 ** 15, growth_interval: int = 2000,
               factor: float = 2.0, dynamic: bool = True, name: str = "loss_scale"):
    super().__init__(name=name)
    self.growth_interval = int(growth_interval)
    self.factor = float(factor)
    self.dynamic = dynamic
    kwargs = dict(trainable=False, synchronization=tf.VariableSynchronization.ON_WRITE,
                  aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    self.scale = tf.Variable(float(initial_scale), dtype=tf.float32, name="scale", **kwargs)
    self.good_steps = tf.Variable(0, dtype=tf.int64, name="good_steps", **kwargs)

  @classmethod
  def from_string(cls, value: str) -> "DynamicLossScale":
    """'dynamic' for a dynamic scale, or a number for a fixed one."""
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

  def can_lower(self, scale) -> tf.Tensor:
    """Whether a non-finite step at `scale` (float32 scalar) lowers the scale: bool
    scalar, False for a fixed scale and at MIN_SCALE."""
    return tf.logical_and(tf.constant(self.dynamic), scale > MIN_SCALE)

  def update(self, step_finite) -> None:
    """Halves the scale after a non-finite step; doubles it after growth_interval
    finite steps in a row. step_finite: bool scalar."""
    if not self.dynamic:
      return
    good = tf.where(step_finite, self.good_steps + 1, tf.zeros_like(self.good_steps))
    grow = good >= self.growth_interval
    scale = tf.where(step_finite, tf.where(grow, self.scale * self.factor, self.scale),
                     tf.maximum(self.scale / self.factor, MIN_SCALE))
    self.scale.assign(scale)
    self.good_steps.assign(tf.where(grow, tf.zeros_like(good), good))
