"""Batching of featurized fine-tuning examples in tf.data: dynamic padding, length buckets.

Batches are dicts of a record kind's featurized examples, padded to the longest
example of the batch: input_word_ids, input_mask, input_type_ids int32 [B, T] (or
[B, C, T] for multiple choice), label_ids [B] (or [B, T] for tagging), example_index
int32 [B]; tagging batches also window_index int32 [B]. Which of them have a token axis
(their last), and what it is padded with, the record kind says (`fills`, its
token_fills), never a feature's name.
"""

from typing import Dict, Mapping, Sequence

import tensorflow as tf

from bert_tf import constants
from bert_tf.data.pipelines import padding


def _token_keys(batch: Mapping[str, tf.Tensor], fills: Mapping[str, object]):
  return [key for key in fills if key in batch]


def trim_to_longest(batch: Dict[str, tf.Tensor], fills: Mapping[str, object]
                    ) -> Dict[str, tf.Tensor]:
  """Cuts a batch padded to seq_length down to its longest example: the last axis of
  each feature of `fills` (the record kind's token_fills)."""
  length = tf.reduce_max(tf.reduce_sum(batch[constants.INPUT_MASK], axis=-1))
  length = tf.maximum(length, 1)
  out = dict(batch)
  for key in _token_keys(batch, fills):
    out[key] = batch[key][..., :length]
  return out


def pad_to_length_bucket(batch: Dict[str, tf.Tensor], bounds: Sequence[int],
                         fills: Mapping[str, object]) -> Dict[str, tf.Tensor]:
  """Pads a batch cut to its longest example (last axis) up to the smallest of `bounds`
  that holds it (bert_tf.data.pipelines.padding.bucket_lengths), so that batches come in
  len(bounds) lengths only: what XLA and TPUs, which compile once per shape, need from
  batches padded to their longest example.

  Args:
    batch: as this module describes it (token features [B, T] or [B, C, T]).
    bounds: increasing lengths, the last one the longest T of the data (seq_length).
    fills: {feature: fill} of the features with a token axis (the record kind's
      token_fills); the others are left as they are.

  Returns:
    the batch with each token feature's last axis one of `bounds` (static where
    there is one bound), padded with its fill.
  """
  length = tf.shape(batch[constants.INPUT_WORD_IDS])[-1]
  lengths = tf.constant(padding.bucket_lengths(bounds))
  target = tf.gather(lengths, tf.minimum(length, lengths.shape[0] - 1))
  out = dict(batch)
  for key in _token_keys(batch, fills):
    value = batch[key]
    paddings = [[0, 0]] * (value.shape.rank - 1) + [[0, target - length]]
    padded = tf.pad(value, paddings, constant_values=tf.cast(fills[key], value.dtype))
    # The padded length is one of `bounds`; the shape says none other, so that a step
    # traced from these batches sees a known length where there is only one bound.
    shape = value.shape.as_list()
    shape[-1] = bounds[0] if len(bounds) == 1 else None
    out[key] = tf.ensure_shape(padded, shape)
  return out

