"""Packing: the examples of a fine-tuning batch laid end to end in rows of seq_length,
each keeping its own [CLS] ... [SEP], positions and segment ids, so that short sentences
cost no padding (train_data.pack_examples)."""

from typing import Dict

import tensorflow as tf

from bert_tf import constants


def pack_batch(batch: Dict[str, tf.Tensor], seq_length: int) -> Dict[str, tf.Tensor]:
  """Packs a batch of N unpadded examples into as few rows as next-fit needs, in batch
  order (already a shuffled one).

  Args:
    batch: dict from Dataset.ragged_batch: input_word_ids, input_mask, input_type_ids
      (int32 ragged [N, None], no example longer than seq_length), and per-example
      features (label_ids, example_index, [N]).
    seq_length: the longest row.

  Returns:
    dict: input_word_ids, input_mask, input_type_ids, input_position_ids (restarting at
    0 with every example), input_example_ids (1, 2, ... along a row, 0 at padding), all
    int32 [R, W] with W the longest filled row; packed_cls_positions int32 [R, Q], the
    [CLS] position of each example of a row (unused slots 0); packed_example_slots
    int32 [N], each example's slot in the flattened [R * Q], in batch order; the
    per-example features unchanged.
  """
  lengths = tf.cast(batch[constants.INPUT_WORD_IDS].row_lengths(), tf.int32)

  def next_fit(state, length):
    row, end = state
    new_row = end + length > seq_length
    return (tf.where(new_row, row + 1, row), tf.where(new_row, length, end + length))

  rows, ends = tf.scan(next_fit, lengths, initializer=(tf.constant(0), tf.constant(0)))
  starts = ends - lengths
  num_rows = rows[-1] + 1
  count = tf.size(lengths)
  first_of_row = tf.math.unsorted_segment_min(tf.range(count), rows, num_rows)
  slots = tf.range(count) - tf.gather(first_of_row, rows)
  positions = tf.ragged.range(lengths).flat_values
  index = tf.stack([tf.repeat(rows, lengths), tf.repeat(starts, lengths) + positions], 1)
  shape = tf.stack([num_rows, tf.reduce_max(ends)])

  def scatter(values):
    return tf.scatter_nd(index, values, shape)

  out = {name: scatter(batch[name].flat_values) for name in constants.ENCODER_INPUTS}
  out[constants.INPUT_POSITION_IDS] = scatter(positions)
  out[constants.INPUT_EXAMPLE_IDS] = scatter(tf.repeat(slots + 1, lengths))
  per_row = tf.reduce_max(slots) + 1
  out[constants.PACKED_CLS_POSITIONS] = tf.scatter_nd(
      tf.stack([rows, slots], 1), starts, tf.stack([num_rows, per_row]))
  out[constants.PACKED_EXAMPLE_SLOTS] = rows * per_row + slots
  for name, value in batch.items():
    out.setdefault(name, value)
  return out


def pack_examples(ds: tf.data.Dataset, batch_size: int, seq_length: int,
                  drop_remainder: bool) -> tf.data.Dataset:
  """Batches unbatched, unpadded examples ([T_i] features) batch_size at a time and
  packs each batch (pack_batch): a step still trains on batch_size examples."""
  ds = ds.ragged_batch(batch_size, drop_remainder=drop_remainder)
  return ds.map(lambda batch: pack_batch(batch, seq_length),
                num_parallel_calls=tf.data.AUTOTUNE)

