"""The BERT learning-rate schedule: linear warm-up, then polynomial decay.

Written with keras.ops: the TensorFlow trainer's optimizers and Keras's own (on any
backend) call it with the step.
"""

import keras
from keras import ops

from bert_tf import configs


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
  """The original BERT schedule.

    lr(step) = peak * step / warmup_steps                  for step < warmup_steps,
    lr(step) = (peak - end) * (1 - p) ** power + end        afterwards,

  where p = min(step, decay_steps) / decay_steps: the decay is indexed by the global
  step, as in the original release, so the rate reaches `end_learning_rate` at
  step decay_steps (normally the last training step) and stays there.

  Args:
    peak_learning_rate: the rate at the end of warm-up.
    warmup_steps: linear warm-up length (0: start at the peak).
    decay_steps: the step at which the decay ends (0: constant after warm-up).
    end_learning_rate: the final rate.
    power: 1.0 for linear decay.

  Call: step (int or float scalar) -> float32 scalar.
  """

  def __init__(self, peak_learning_rate: float, warmup_steps: int, decay_steps: int,
               end_learning_rate: float = 0.0, power: float = 1.0):
    self.peak_learning_rate = float(peak_learning_rate)
    self.warmup_steps = int(warmup_steps)
    self.decay_steps = int(decay_steps)
    self.end_learning_rate = float(end_learning_rate)
    self.power = float(power)

  def __call__(self, step):
    step = ops.cast(step, "float32")
    peak = ops.convert_to_tensor(self.peak_learning_rate, "float32")
    warmup = float(self.warmup_steps)
    if self.decay_steps > 0:
      progress = ops.minimum(step, float(self.decay_steps))
      remaining = 1.0 - progress / float(self.decay_steps)
      decayed = (peak - self.end_learning_rate) * ops.power(remaining, self.power)
      decayed = decayed + self.end_learning_rate
    else:
      decayed = peak
    if self.warmup_steps > 0:
      warm = peak * step / warmup
      return ops.where(step < warmup, warm, decayed)
    return decayed

  def get_config(self):
    return {
        "peak_learning_rate": self.peak_learning_rate,
        "warmup_steps": self.warmup_steps,
        "decay_steps": self.decay_steps,
        "end_learning_rate": self.end_learning_rate,
        "power": self.power,
    }


def for_run(config: configs.OptimizerConfig, train_steps: int) -> WarmupPolynomialDecay:
  """The schedule of a run: optimizer.decay_steps, or train_steps where it is 0 (the rate
  reaches end_learning_rate at the last step)."""
  return WarmupPolynomialDecay(config.learning_rate, config.warmup_steps,
                               config.decay_steps or train_steps,
                               config.end_learning_rate, config.power)


def rate_at(schedule: WarmupPolynomialDecay, step: int) -> float:
  """The schedule's rate at `step`, as a Python float."""
  return float(ops.convert_to_numpy(schedule(step)))
