"""What the training steps of both engines share: the names of a step's outputs, the
order in which a batch splits into gradient-accumulation micro-batches, and the
dropout random state a checkpoint stores.

A step's outputs, summed over the steps of one loop (bert_tf.training.reports), hold
the task's losses, its metric sums as `metric_keys(name)`, and:
  gradient_norm           the global norm before clipping;
  learning_rate           of the update;
  skipped_steps           steps whose loss or gradients were not finite (weights and
                          optimizer state left as they were);
  non_finite_loss_steps   steps whose loss was not finite where no dynamic loss scale
                          could recover (the Trainer stops on them);
  loss_scale              under mixed_float16.
"""

from typing import Callable, Dict, List, Mapping, Sequence, Tuple

import numpy as np

from bert_tf import configs
from bert_tf import constants

GRADIENT_NORM = "gradient_norm"
LEARNING_RATE = "learning_rate"
SKIPPED_STEPS = "skipped_steps"
NON_FINITE_LOSS_STEPS = "non_finite_loss_steps"
LOSS_SCALE = "loss_scale"
# Outputs that count steps rather than being averaged over them.
COUNTS = (NON_FINITE_LOSS_STEPS, SKIPPED_STEPS)

# Micro-batch i holds rows [i * m, (i + 1) * m) of the batch (m rows per micro-batch).
CONTIGUOUS = "contiguous"
# Micro-batch i holds rows i, i + n, i + 2n, ... (n micro-batches).
STRIDED = "strided"
# The TensorFlow engine splits each replica's own batch (tf.distribute hands every
# replica its rows), so contiguous rows stay on the replica. The JAX engine splits the
# global batch, sharded over the devices along its rows: strided micro-batches take
# rows of every device's shard alike, so each micro-batch runs on all devices without
# moving rows between them. Checkpoints and the engines-agree tests hold each order.
TENSORFLOW_ORDER = CONTIGUOUS
JAX_ORDER = STRIDED


def metric_keys(name: str) -> Tuple[str, str]:
  """The output keys of a decomposable metric's (numerator, denominator)."""
  return f"{name}/numerator", f"{name}/denominator"


def flat_outputs(losses: Mapping[str, object], metrics: Mapping[str, Tuple[object, object]]
                 ) -> Dict[str, object]:
  """{loss name: value} and {metric: (numerator, denominator)} as one flat dict."""
  out = dict(losses)
  for name, pair in metrics.items():
    out.update(zip(metric_keys(name), pair))
  return out


def output_keys(loss_names: Sequence[str], metric_names: Sequence[str],
                with_loss_scale: bool) -> List[str]:
  """Every output key of a step, in a fixed order: the losses, the metrics' numerators
  and denominators, then the update's keys (loss_scale under mixed_float16)."""
  keys = list(loss_names)
  for name in metric_names:
    keys += metric_keys(name)
  keys += [GRADIENT_NORM, LEARNING_RATE, NON_FINITE_LOSS_STEPS, SKIPPED_STEPS]
  return keys + [LOSS_SCALE] if with_loss_scale else keys


def micro_batch_rows(rows: int, num: int, order: str) -> np.ndarray:
  """[num, rows // num] row indices of each micro-batch of a `rows`-row batch."""
  configs.check_batch_sizes(rows, accumulation_steps=num, batch_name="The batch")
  index = np.arange(rows)
  if order == CONTIGUOUS:
    return index.reshape(num, rows // num)
  return index.reshape(rows // num, num).T


def split_micro_batches(x, num: int, order: str, rows, reshape: Callable,
                        swap_leading: Callable):
  """Splits a [rows, ...] array into [num, rows // num, ...] micro-batches in `order`
  (as `micro_batch_rows` numbers them), with the backend's operations.

  Args:
    x: the batch's array.
    num: micro-batches.
    order: CONTIGUOUS or STRIDED.
    rows: x's first dimension (an int, checked to divide by num; or a tensor where
      the shape is not static).
    reshape: (x, (a, b)) -> x as [a, b, ...] (its first dimension split).
    swap_leading: swaps the first two dimensions.
  """
  if isinstance(rows, int):
    configs.check_batch_sizes(rows, accumulation_steps=num, batch_name="The batch")
  if order == CONTIGUOUS:
    return reshape(x, (num, rows // num))
  return swap_leading(reshape(x, (rows // num, num)))


def seed_states(model) -> List:
  """The state variables of the model's dropout SeedGenerators, in model order (what a
  checkpoint stores as the random state)."""
  return [v for v in model.variables if v.name == constants.SEED_STATE_NAME]
