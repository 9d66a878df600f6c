"""The one definition of the project's optimizers, AdamW, LAMB and SGD, shared by both
engines: written with keras.ops, it runs as TensorFlow ops inside the TensorFlow
engine's fused update (bert_tf.training.tf_engine.optimizer) and as jax.numpy inside the JAX
engine's jit-compiled step (bert_tf.training.jax_engine.optimizer). Imports no TensorFlow.

The maths, as the Adam and LAMB papers and the original BERT release define them, at
the optimizer's update count `step` (updates taken before this one, skipped ones
included), t = step + 1, g the gradient after loss-scale removal and clipping:
  m <- beta_1 m + (1 - beta_1) g,      v <- beta_2 v + (1 - beta_2) g^2
  adamw: update = m^ / (sqrt(v^) + epsilon),  m^ = m / (1 - beta_1^t), v^ = v / (1 - beta_2^t)
         (epsilon after bias correction: it is not scaled by 1 / sqrt(1 - beta_2^t))
  lamb:  the same, times ||w|| / ||update|| (1 where either norm is 0)
  sgd:   update = g
  decayed variables: update += weight_decay_rate * w (inside LAMB's trust ratio; LAMB's
         ratio applies to decayed variables only)
  w <- w - lr(step) * update, lr the warm-up/decay schedule (bert_tf.training.schedules)
A variable is decayed unless its path (`embeddings/layer_norm/gamma`) contains one of
exclude_from_weight_decay. Before the update, the gradients of the whole step (summed
over micro-batches and replicas) are divided by the loss scale and scaled to at most
global_clipnorm in global norm (`gradient_scale`); where they or the loss are not finite
the step is skipped: weights and moments keep their values, the count advances.

The optimizer state, the same on both engines, keyed by name (bert_tf.constants spells
the names; the portable checkpoint's `optimizer/` group stores them):
  count                       int scalar: the update count (the trainer's step);
  m/<variable path>, v/<...>  float32, the variable's shape: Adam's moments of every
                              trainable variable (adamw and lamb; sgd has none);
  loss_scale/scale            float32 scalar, under mixed_float16
  loss_scale/good_steps       int scalar: finite steps since the scale last changed.
The TensorFlow engine keeps the count in the trainer's `step` variable and the loss
scale in a DynamicLossScale; its TensorFlow checkpoints key the moments
`optimizer/slots/<path, / written .S>/m` (tf.Module tracking), as they always did.
"""

from typing import Callable, Sequence, Tuple

from keras import ops

from bert_tf import configs
from bert_tf import constants
from bert_tf.training import schedules


def slot_name(slot: str, variable_path: str) -> str:
  """The state's name of a variable's slot: `m/<variable path>`."""
  return f"{slot}/{variable_path}"


def uses_weight_decay(path: str, exclude_from_weight_decay: Sequence[str]) -> bool:
  """True unless one of the exclusion substrings occurs in the variable path."""
  return not any(pattern in path for pattern in exclude_from_weight_decay)


def gradient_scale(grad_norm, loss, loss_scale=None, global_clipnorm: float = 0.0):
  """The factor every gradient of a step is multiplied by, and whether the step applies.

  Args:
    grad_norm: float32 scalar, the global norm of the step's gradients as computed
      (times the loss scale under mixed_float16).
    loss: float32 scalar, the step's loss.
    loss_scale: float32 scalar or None.
    global_clipnorm: clip to this global norm (0: no clipping).

  Returns:
    (gradient_norm, scale, step_finite): the norm without the loss scale (float32),
    the factor that removes the loss scale and clips, as tf.clip_by_global_norm does
    (float32; not finite where the norm is not), and whether the gradients and the
    loss are finite (bool). A NaN or Inf anywhere makes the norm non-finite, so no
    pass over the gradients checks them.
  """
  grad_norm = ops.cast(grad_norm, "float32")
  scale = ops.ones((), "float32")
  if loss_scale is not None:
    scale = 1.0 / loss_scale
    grad_norm = grad_norm / loss_scale
  finite = ops.logical_and(ops.isfinite(grad_norm), ops.isfinite(loss))
  if global_clipnorm > 0:
    scale = scale * (global_clipnorm / ops.maximum(grad_norm, global_clipnorm))
  return grad_norm, scale, finite


class UpdateRule:
  """AdamW, LAMB or SGD with decoupled weight decay and a step-indexed schedule.

  Args:
    algorithm: "adamw", "lamb" or "sgd".
    learning_rate: step (int scalar) -> float32 scalar.
    weight_decay_rate: decoupled weight decay (0: none).
    exclude_from_weight_decay: path substrings of variables not decayed.
    beta_1, beta_2, epsilon: Adam's.
  """

  def __init__(self, algorithm: str, learning_rate: Callable, weight_decay_rate: float = 0.0,
               exclude_from_weight_decay: Sequence[str] = (), beta_1: float = 0.9,
               beta_2: float = 0.999, epsilon: float = 1e-6):
    if algorithm not in configs.OPTIMIZERS:
      raise ValueError(f"algorithm must be one of {configs.OPTIMIZERS}, got '{algorithm}'")
    self.algorithm = algorithm
    self.learning_rate = learning_rate
    self.weight_decay_rate = float(weight_decay_rate)
    self.exclude_from_weight_decay = tuple(exclude_from_weight_decay)
    self.beta_1 = float(beta_1)
    self.beta_2 = float(beta_2)
    self.epsilon = float(epsilon)

  @property
  def slot_names(self) -> Tuple[str, ...]:
    """The per-variable state: Adam's moments ("m", "v"), none for SGD."""
    return () if self.algorithm == "sgd" else constants.ADAM_SLOTS

  def decays(self, path: str) -> bool:
    """Whether the variable at `path` gets weight decay (and, for LAMB, the trust
    ratio)."""
    return self.weight_decay_rate > 0 and uses_weight_decay(
        path, self.exclude_from_weight_decay)

  def new_values(self, var, grad, slots, lr, t, scale, should_apply, decay: bool):
    """One variable's update: (new var, *new slots) from the current values.

    Args:
      var: float32 [shape], the variable's value.
      grad: [shape], its gradient as computed (summed, loss-scaled).
      slots: float32 [shape] each, in slot_names order.
      lr: float32 scalar, the learning rate of this update.
      t: float32 scalar, this update's number from 1 (bias correction).
      scale: float32 scalar the gradient is multiplied by first (gradient_scale's).
      should_apply: bool scalar; False keeps every value as it is.
      decay: whether the variable is decayed (self.decays of its path).

    A skipped step is arithmetic, not a choice between new and old values: its
    gradient is taken as zero and every change multiplied by zero, which leaves each
    value as it was. XLA then updates in place as on an applied step; a select of the
    old values (or a conditional) made it write copies, at 1.7 times the update's CPU
    time (BERT-mini, 78 variables, TensorFlow).
    """
    applied = ops.cast(should_apply, "float32")
    # After the scale, which a non-finite gradient norm makes non-finite too.
    grad = ops.where(should_apply, ops.cast(grad, "float32") * scale, 0.0)
    new_slots = ()
    if self.algorithm == "sgd":
      update = grad
    else:
      m, v = slots
      new_m = m + applied * (1.0 - self.beta_1) * (grad - m)
      new_v = v + applied * (1.0 - self.beta_2) * (ops.square(grad) - v)
      m_hat = new_m / (1.0 - ops.power(self.beta_1, t))
      v_hat = new_v / (1.0 - ops.power(self.beta_2, t))
      update = m_hat / (ops.sqrt(v_hat) + self.epsilon)
      new_slots = (new_m, new_v)
    if decay:
      update = update + self.weight_decay_rate * var
    if self.algorithm == "lamb" and decay:
      w_norm = ops.sqrt(ops.sum(ops.square(var)))
      u_norm = ops.sqrt(ops.sum(ops.square(update)))
      ratio = ops.where(ops.logical_and(w_norm > 0, u_norm > 0),
                        w_norm / ops.maximum(u_norm, 1e-30), 1.0)
      update = update * ratio
    return (var - (applied * lr) * update, *new_slots)

  def step_values(self, step):
    """(lr, t) of the update after `step` updates: float32 scalars."""
    return (ops.cast(self.learning_rate(step), "float32"),
            ops.cast(step, "float32") + 1.0)


def build_update_rule(config: configs.OptimizerConfig, train_steps: int) -> UpdateRule:
  """The update rule an OptimizerConfig describes (decay_steps 0: train_steps, so the
  rate reaches end_learning_rate at the last step). Its global_clipnorm is the step's
  (gradient_scale)."""
  schedule = schedules.for_run(config, train_steps)
  return UpdateRule(config.type, schedule, weight_decay_rate=config.weight_decay_rate,
                    exclude_from_weight_decay=config.exclude_from_weight_decay,
                    beta_1=config.beta_1, beta_2=config.beta_2, epsilon=config.epsilon)

