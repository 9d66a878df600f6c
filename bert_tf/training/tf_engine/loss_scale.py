"""The TensorFlow engine's dynamic loss scale for mixed_float16: the state (a mirrored
scale and count of consecutive finite steps, both checkpointed) of the rule both engines
share (bert_tf.training.loss_scale_rule). Every replica computes the same decision from
the same all-reduced values, so the scale stays mirrored.
"""

import tensorflow as tf

from bert_tf.training.loss_scale_rule import LossScaleRule


class DynamicLossScale(tf.Module):
  """The loss scale and its count of consecutive finite steps (both checkpointed).

  Create under the strategy's scope; `update` may run in replica context.
  """

  def __init__(self, initial_scale: float = 2.0 ** 15, growth_interval: int = 2000,
               factor: float = 2.0, dynamic: bool = True, name: str = "loss_scale"):
    super().__init__(name=name)
    self.rule = LossScaleRule(initial_scale, growth_interval, factor, dynamic)
    kwargs = dict(trainable=False, synchronization=tf.VariableSynchronization.ON_WRITE,
                  aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    self.scale = tf.Variable(float(initial_scale), dtype=tf.float32, name="scale", **kwargs)
    self.good_steps = tf.Variable(0, dtype=tf.int64, name="good_steps", **kwargs)

  @classmethod
  def from_string(cls, value: str) -> "DynamicLossScale":
    """'dynamic' for a dynamic scale, or a number for a fixed one."""
    rule = LossScaleRule.from_string(value)
    return cls(initial_scale=rule.initial_scale, dynamic=rule.dynamic)

  def can_lower(self, scale) -> tf.Tensor:
    """Whether a non-finite step at `scale` (float32 scalar) lowers the scale."""
    return self.rule.can_lower(scale)

  def update(self, step_finite) -> None:
    """Halves the scale after a non-finite step; doubles it after growth_interval
    finite steps in a row. step_finite: bool scalar."""
    if not self.rule.dynamic:
      return
    scale, good_steps = self.rule.next(self.scale.read_value(), self.good_steps.read_value(),
                                       step_finite)
    self.scale.assign(scale)
    self.good_steps.assign(good_steps)
