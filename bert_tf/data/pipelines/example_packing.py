"""Packing: the examples of a fine-tuning batch laid end to end in rows of seq_length,
each keeping its own [CLS] ... [SEP], positions and segment ids, so that short sentences
cost no padding (train_data.pack_examples).

Written in NumPy once for both inputs: the host input packs its batches with it, and the
tf.data input runs it on each batch of rows it reads in the one order
(bert_tf.data.records.tfrecords.ordered_array_dataset). Importing it needs no TensorFlow.
"""

from typing import Dict, Mapping, Optional

import numpy as np

from bert_tf import constants

# What packing adds, int32 [R, W] (the first two) or [R, Q] / [N] (the last two).
_ROW_FEATURES = (constants.INPUT_POSITION_IDS, constants.INPUT_EXAMPLE_IDS)


def _token_fills(fills: Optional[Mapping[str, object]]) -> Mapping[str, object]:
  return dict.fromkeys(constants.ENCODER_INPUTS, 0) if fills is None else fills


def _packed_dtype(dtype) -> np.dtype:
  """int32 for an integer feature, float32 for another: what batches hold."""
  return np.dtype(np.int32 if np.issubdtype(dtype, np.integer) else np.float32)


def pack_batch(batch: Mapping[str, np.ndarray], seq_length: int,
               width: Optional[int] = None,
               fills: Optional[Mapping[str, object]] = None) -> Dict[str, np.ndarray]:
  """Packs a batch of N examples into as few rows as next-fit needs, in batch order
  (already a shuffled one).

  Args:
    batch: input_word_ids, input_mask, input_type_ids int [N, T] (each example's tokens
      first, its length the sum of its input_mask, none longer than seq_length), and
      per-example features (label_ids, example_index, [N]).
    seq_length: the longest row.
    width: the rows' length; default the longest filled row.
    fills: {feature: fill} of the features with a token axis (the record kind's
      token_fills), laid along the rows with the examples' tokens and `fill` past them;
      default the encoder inputs, filled with 0.

  Returns:
    dict: each feature of `fills` (the encoder inputs among them), input_position_ids
    (restarting at 0 with every example), input_example_ids (1, 2, ... along a row, 0
    at padding), all [R, W] (int32, or float32 for a float feature); packed_cls_positions int32 [R, Q], the [CLS] position of each example
    of a row (unused slots 0); packed_example_slots int32 [N], each example's slot in
    the flattened [R * Q], in batch order; the per-example features unchanged.
  """
  lengths = np.sum(np.asarray(batch[constants.INPUT_MASK]) != 0, axis=-1).astype(np.int64)
  count = len(lengths)
  rows = np.zeros(count, np.int64)
  ends = np.zeros(count, np.int64)
  row = end = 0
  for i, length in enumerate(lengths):
    if end + length > seq_length:
      row, end = row + 1, 0
    end += length
    rows[i], ends[i] = row, end
  starts = ends - lengths
  num_rows = int(rows[-1]) + 1 if count else 0
  first_of_row = np.searchsorted(rows, np.arange(num_rows))
  slots = np.arange(count) - first_of_row[rows]
  width = int(ends.max(initial=1)) if width is None else width
  token_rows = np.repeat(rows, lengths)
  positions = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
  columns = np.repeat(starts, lengths) + positions
  example_tokens = np.repeat(np.arange(count), lengths)

  def scatter(values, fill=0):
    values = np.asarray(values)
    out = np.full([num_rows, width], fill, _packed_dtype(values.dtype))
    out[token_rows, columns] = values
    return out

  out = {name: scatter(np.asarray(batch[name])[example_tokens, positions], fill)
         for name, fill in _token_fills(fills).items() if name in batch}
  out[constants.INPUT_POSITION_IDS] = scatter(positions)
  out[constants.INPUT_EXAMPLE_IDS] = scatter(np.repeat(slots + 1, lengths))
  per_row = int(slots.max(initial=0)) + 1
  cls_positions = np.zeros([num_rows, per_row], np.int32)
  cls_positions[rows, slots] = starts
  out[constants.PACKED_CLS_POSITIONS] = cls_positions
  out[constants.PACKED_EXAMPLE_SLOTS] = (rows * per_row + slots).astype(np.int32)
  for name, value in batch.items():
    out.setdefault(name, value)
  return out


class Packer:
  """pack_batch as the `finish` of a batch of padded rows, for both inputs.

  Args:
    arrays: the examples, {feature: [N, ...]} (what the batches are cut from).
    seq_length: the longest row.
    width: the rows' length (default: each batch's longest filled row).
    fills: the features with a token axis and their fills (pack_batch's).

  Attributes:
    output_spec: {feature: (dtype, rank)} of the packed batches.
  """

  def __init__(self, arrays: Mapping[str, np.ndarray], seq_length: int,
               width: Optional[int] = None,
               fills: Optional[Mapping[str, object]] = None):
    self.seq_length = seq_length
    self.width = width
    self.fills = fills
    self.output_spec = {key: (np.asarray(value).dtype, np.ndim(value))
                        for key, value in arrays.items()}
    for name in _token_fills(fills):
      if name in arrays:
        self.output_spec[name] = (_packed_dtype(np.asarray(arrays[name]).dtype), 2)
    for name in (*_ROW_FEATURES, constants.PACKED_CLS_POSITIONS):
      self.output_spec[name] = (np.dtype(np.int32), 2)
    self.output_spec[constants.PACKED_EXAMPLE_SLOTS] = (np.dtype(np.int32), 1)

  def __call__(self, batch: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
    return pack_batch(batch, self.seq_length, self.width, self.fills)
