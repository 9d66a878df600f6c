"""Gathering the vectors at given positions of each sequence."""

import keras
from keras import ops


def gather_positions(sequence, positions):
  """The vectors at `positions` of each sequence, as one gather of rows.

  On JAX, a gather whose batch dimension stays a batch dimension (take_along_axis:
  jnp's gathers rows per sequence, with operand and index batching dimensions), so that
  where the batch is split over devices each device gathers from its own sequences:
  the flattened form's row numbers span the global batch, and XLA's SPMD partitioner
  gathered every device's rows to every device for it (an all-gather forward and
  several for the scatter-add backward, in each step). Elsewhere the batch is flattened
  to [B * T, H] and each row index offset by its sequence's start, so the gather reads
  whole rows; TensorFlow's take_along_axis would broadcast the indices to [B, P, H]
  first.

  Args:
    sequence: float [B, T, H].
    positions: int [B, P], indices into T.

  Returns:
    float [B, P, H].
  """
  positions = ops.cast(positions, "int32")
  if keras.backend.backend() == "jax":
    return ops.take_along_axis(sequence, positions[:, :, None], axis=1)
  shape = ops.shape(sequence)
  batch, length, width = shape[0], shape[1], shape[2]
  offsets = ops.arange(batch, dtype="int32")[:, None] * length
  rows = ops.reshape(sequence, (-1, width))
  return ops.take(rows, positions + offsets, axis=0)
