"""Gathering the vectors at given positions of each sequence."""

from keras import ops


def gather_positions(sequence, positions):
  """The vectors at `positions` of each sequence, as one gather of rows.

  The batch is flattened to [B * T, H] and each row index offset by its sequence's
  start, so the gather reads whole rows; take_along_axis would broadcast the indices
  to [B, P, H] first.

  Args:
    sequence: float [B, T, H].
    positions: int [B, P], indices into T.

  Returns:
    float [B, P, H].
  """
  shape = ops.shape(sequence)
  batch, length, width = shape[0], shape[1], shape[2]
  positions = ops.cast(positions, "int32")
  offsets = ops.arange(batch, dtype="int32")[:, None] * length
  rows = ops.reshape(sequence, (-1, width))
  return ops.take(rows, positions + offsets, axis=0)
