"""The experiment's optimizer as a Keras optimizer, for the trainers of backends other
than TensorFlow (bert_tf.training.jax_trainer). Imports no TensorFlow.

Keras's AdamW, Lamb and SGD with the project's schedule (bert_tf.training.schedules,
indexed by optimizer updates), weight-decay exclusions and global-norm clipping, and
Keras's own gradient accumulation. What differs from the TensorFlow trainer's
optimizers (bert_tf.training.optimizers), by Keras's definitions:
  - Adam's epsilon is added to sqrt(v) before bias correction, i.e. it acts as
    epsilon / sqrt(1 - beta_2^t) on the bias-corrected moments (the same after a few
    thousand steps; larger in the first ones);
  - LAMB decays weights outside the trust ratio and applies the ratio to every
    variable, where the project's LAMB decays inside it and leaves excluded
    variables unscaled;
  - a step whose gradients are not finite is applied (float32, mixed_bfloat16); the
    trainer stops at the first non-finite loss before any checkpoint is written, as
    the TensorFlow trainer does. mixed_float16 wraps the optimizer in Keras's
    LossScaleOptimizer (dynamic scale, which skips non-finite steps itself).
"""

from typing import Sequence

import keras

from bert_tf import configs
from bert_tf.training.schedules import WarmupPolynomialDecay


def uses_weight_decay(path: str, exclude_from_weight_decay: Sequence[str]) -> bool:
  """True unless one of the exclusion substrings occurs in the variable path (for
  this module's optimizers and the TensorFlow trainer's, bert_tf.training.optimizers)."""
  return not any(pattern in path for pattern in exclude_from_weight_decay)


class _PerUpdate(keras.optimizers.schedules.LearningRateSchedule):
  """A schedule of optimizer updates, read at Keras's count of applied (micro-)batches:
  Keras calls the schedule with its raw iteration counter, which counts every
  accumulated micro-batch."""

  def __init__(self, schedule, accumulation_steps: int):
    self.schedule = schedule
    self.accumulation_steps = accumulation_steps

  def __call__(self, step):
    return self.schedule(keras.ops.floor_divide(step, self.accumulation_steps))

  def get_config(self):
    return {"schedule": keras.saving.serialize_keras_object(self.schedule),
            "accumulation_steps": self.accumulation_steps}


def build_keras_optimizer(config: configs.OptimizerConfig, train_steps: int,
                          trainable_variables: Sequence, accumulation_steps: int = 1,
                          mixed_precision_dtype: str = "float32",
                          loss_scale: str = "dynamic") -> keras.optimizers.Optimizer:
  """A built Keras optimizer of `config` over `trainable_variables`.

  Args:
    config: the experiment's optimizer section (decay_steps 0: train_steps).
    train_steps: trainer.train_steps.
    trainable_variables: the model's; those whose path contains one of
      config.exclude_from_weight_decay are not decayed (by path, not Keras's short
      variable name, so "layer_norm" excludes every LayerNorm's gamma and beta).
    accumulation_steps: trainer.gradient_accumulation_steps; the optimizer averages
      that many gradients per update.
    mixed_precision_dtype: "mixed_float16" wraps it in a LossScaleOptimizer.
    loss_scale: runtime.loss_scale; a number is the initial scale.
  """
  schedule = WarmupPolynomialDecay(config.learning_rate, config.warmup_steps,
                                   config.decay_steps or train_steps,
                                   config.end_learning_rate, config.power)
  if accumulation_steps > 1:
    schedule = _PerUpdate(schedule, accumulation_steps)
  common = dict(learning_rate=schedule,
                weight_decay=config.weight_decay_rate or None,
                global_clipnorm=config.global_clipnorm or None,
                gradient_accumulation_steps=accumulation_steps if accumulation_steps > 1
                else None)
  if config.type == "adamw":
    # Keras's AdamW takes no None: a rate of 0 decays by nothing.
    common["weight_decay"] = config.weight_decay_rate
    optimizer = keras.optimizers.AdamW(beta_1=config.beta_1, beta_2=config.beta_2,
                                       epsilon=config.epsilon, **common)
  elif config.type == "lamb":
    optimizer = keras.optimizers.Lamb(beta_1=config.beta_1, beta_2=config.beta_2,
                                      epsilon=config.epsilon, **common)
  elif config.type == "sgd":
    optimizer = keras.optimizers.SGD(**common)
  else:
    raise configs.ConfigError(f"optimizer.type: no Keras optimizer for '{config.type}'")
  excluded = [v for v in trainable_variables
              if not uses_weight_decay(v.path, config.exclude_from_weight_decay)]
  optimizer.exclude_from_weight_decay(var_list=excluded)
  if mixed_precision_dtype == "mixed_float16":
    initial = 2.0 ** 15 if loss_scale == "dynamic" else float(loss_scale)
    optimizer = keras.optimizers.LossScaleOptimizer(optimizer, initial_scale=initial)
  optimizer.build(list(trainable_variables))
  return optimizer
