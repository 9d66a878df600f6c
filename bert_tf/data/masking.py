"""Masked-LM masks drawn in the input pipeline (RoBERTa-style dynamic masking).

Pure TensorFlow ops on batches, with stateless random ops seeded per batch, so they run in
tf.data on any host (TPU included) and the iterator stays checkpointable. The rules are
the original BERT release's: candidates are every real token except [CLS] and [SEP];
min(max_predictions, max(1, round(length * masked_lm_prob))) of them are predicted
(length counts [CLS]/[SEP], round is half to even); with whole-word masking a "##" piece
joins the word before it and words are taken in random order while they fit; of the
chosen positions 80% become [MASK], 10% a random id, 10% stay; positions are sorted.

Sequences read from files that were masked when written are first unmasked with
`undo_masking` (the original ids are put back from masked_lm_ids), so files from either
tool serve.
"""

from typing import Dict

import tensorflow as tf

from bert_tf import constants
from bert_tf.data.pretraining_instances import SpecialIds
from bert_tf.text import vocab as vocab_lib


def read_masking_vocab(vocab_file: str) -> SpecialIds:
  """The special ids, size and "##" pieces of a vocab file, read by `load_vocab`.

  Raises:
    ValueError: naming the file (and line) when it is missing, malformed or lacks a
      special token.
  """
  if not vocab_file:
    raise ValueError("Dynamic masking needs tokenizer.vocab_file")
  try:
    tokens = vocab_lib.load_vocab(vocab_file)
  except FileNotFoundError as e:
    raise ValueError(f"{e} (dynamic masking needs tokenizer.vocab_file)") from None
  return SpecialIds.from_vocab(tokens, vocab_file)


def undo_masking(input_word_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights):
  """Puts the original ids back at the masked positions.

  Args:
    input_word_ids: int32 [B, S]; masked_lm_positions, masked_lm_ids: int32 [B, P];
    masked_lm_weights: float32 [B, P] (0 marks padding slots, which are left alone).

  Returns:
    int32 [B, S] unmasked ids.
  """
  current = tf.gather(input_word_ids, masked_lm_positions, batch_dims=1)
  updates = tf.where(masked_lm_weights > 0, masked_lm_ids, current)
  batch = tf.shape(input_word_ids)[0]
  rows = tf.broadcast_to(tf.range(batch)[:, None], tf.shape(masked_lm_positions))
  indices = tf.stack([rows, masked_lm_positions], axis=-1)
  return tf.tensor_scatter_nd_update(input_word_ids, indices, updates)


def _round_half_even(x):
  return tf.round(x)  # tf.round rounds half to even, like Python 3's round().


def _choose_positions(keys, candidates, num_predict, is_continuation, input_word_ids):
  """bool [B, S]: the positions to predict (see the module docstring)."""
  seq_length = tf.shape(keys)[1]
  if is_continuation is None:
    keys = tf.where(candidates, keys, 2.0)
    kth = tf.gather(tf.sort(keys, axis=1), tf.minimum(num_predict, seq_length) - 1,
                    batch_dims=1)
    return candidates & (keys <= kth[:, None])
  batch = tf.shape(keys)[0]
  cont = tf.gather(is_continuation, input_word_ids) & candidates
  cand_int = tf.cast(candidates, tf.int32)
  has_previous = tf.cumsum(cand_int, axis=1, exclusive=True) > 0
  starts = candidates & ~(cont & has_previous)
  group = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1
  safe_group = tf.maximum(group, 0)
  rows = tf.range(batch)[:, None]
  segment = rows * seq_length + safe_group
  group_length = tf.reshape(
      tf.math.unsorted_segment_sum(tf.reshape(cand_int, [-1]), tf.reshape(segment, [-1]),
                                   batch * seq_length), [batch, seq_length])
  order = tf.argsort(tf.where(starts, keys, 2.0), axis=1, stable=True)
  num_groups = tf.reduce_sum(tf.cast(starts, tf.int32), axis=1)
  valid = tf.range(seq_length)[None, :] < num_groups[:, None]
  ordered_groups = tf.gather(safe_group, order, batch_dims=1)
  ordered_length = tf.where(valid, tf.gather(group_length, ordered_groups, batch_dims=1),
                            seq_length + 1)

  # Words are visited in their random order; the walk stops once every row is full.
  columns = tf.range(seq_length)[None, :]

  def keep_going(j, total, _):
    return (j < tf.reduce_max(num_groups)) & tf.reduce_any(total < num_predict)

  def visit(j, total, taken):
    lengths = tf.gather(ordered_length, j, axis=1)
    fits = total + lengths <= num_predict
    taken = taken | (fits[:, None] & tf.equal(columns, j))
    return j + 1, total + tf.where(fits, lengths, 0), taken

  _, _, taken = tf.while_loop(
      keep_going, visit,
      (tf.constant(0), tf.zeros([batch], tf.int32), tf.zeros([batch, seq_length], tf.bool)))
  taken = taken & valid
  taken_segment = tf.where(valid, rows * seq_length + ordered_groups, batch * seq_length)
  group_taken = tf.math.unsorted_segment_max(
      tf.reshape(tf.cast(taken, tf.int32), [-1]), tf.reshape(taken_segment, [-1]),
      batch * seq_length + 1)[:-1]
  group_taken = tf.reshape(group_taken, [batch, seq_length]) > 0
  return candidates & tf.gather(group_taken, safe_group, batch_dims=1)


def mask_batch(input_word_ids, input_mask, seed, vocab: SpecialIds,
               masked_lm_prob: float, max_predictions_per_seq: int,
               whole_word: bool = False) -> Dict[str, tf.Tensor]:
  """Draws masks for a batch of unmasked sequences.

  Args:
    input_word_ids: int32 [B, S] unmasked ids; input_mask: int32 [B, S].
    seed: int32/int64 [2], the stateless seed of this batch.
    vocab: the special ids, vocab size and "##" pieces.
    masked_lm_prob: fraction of tokens to predict.
    max_predictions_per_seq: P.
    whole_word: mask whole words.

  Returns:
    dict: input_word_ids int32 [B, S] (masked), masked_lm_positions int32 [B, P] (sorted,
    0-padded), masked_lm_ids int32 [B, P] (original ids, 0-padded), masked_lm_weights
    float32 [B, P].
  """
  input_word_ids = tf.convert_to_tensor(input_word_ids, tf.int32)
  input_mask = tf.cast(input_mask, tf.int32)
  shape = tf.shape(input_word_ids)
  seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 3)
  candidates = ((input_mask > 0) & tf.not_equal(input_word_ids, vocab.cls_id)
                & tf.not_equal(input_word_ids, vocab.sep_id))
  lengths = tf.cast(tf.reduce_sum(input_mask, axis=1), tf.float32)
  num_predict = tf.cast(_round_half_even(lengths * masked_lm_prob), tf.int32)
  num_predict = tf.minimum(max_predictions_per_seq, tf.maximum(1, num_predict))
  keys = tf.random.stateless_uniform(shape, seeds[0])
  continuation = tf.constant(vocab.is_continuation) if whole_word else None
  chosen = _choose_positions(keys, candidates, num_predict, continuation, input_word_ids)

  draw = tf.random.stateless_uniform(shape, seeds[1])
  random_ids = tf.random.stateless_uniform(shape, seeds[2], minval=0,
                                           maxval=vocab.vocab_size, dtype=tf.int32)
  masked_ids = tf.where(chosen & (draw < 0.8), vocab.mask_id,
                        tf.where(chosen & (draw >= 0.9), random_ids, input_word_ids))

  seq_length = shape[1]
  position = tf.range(seq_length)[None, :]
  # Chosen positions first, in order; then the rest.
  order = tf.argsort(tf.where(chosen, position, position + seq_length), axis=1)
  order = order[:, :max_predictions_per_seq]
  count = tf.reduce_sum(tf.cast(chosen, tf.int32), axis=1)
  slot_valid = tf.range(max_predictions_per_seq)[None, :] < count[:, None]
  # When P > S the slice above is short; pad it.
  pad = max_predictions_per_seq - tf.shape(order)[1]
  order = tf.pad(order, [[0, 0], [0, pad]])
  positions = tf.where(slot_valid, order, 0)
  labels = tf.where(slot_valid, tf.gather(input_word_ids, positions, batch_dims=1), 0)
  return {
      constants.INPUT_WORD_IDS: masked_ids,
      constants.MASKED_LM_POSITIONS: positions,
      constants.MASKED_LM_IDS: labels,
      constants.MASKED_LM_WEIGHTS: tf.cast(slot_valid, tf.float32),
  }


def dynamic_masking_fn(vocab: SpecialIds, masked_lm_prob: float,
                       max_predictions_per_seq: int, whole_word: bool = False):
  """Returns fn(seed int64 scalar, features dict) -> features with fresh masks.

  The features are the model's (bert_tf.constants names); the input's masks are undone
  first, then new ones drawn. Meant for `Dataset.zip((Dataset.random(), batches)).map`.
  """

  def fn(seed, features):
    features = dict(features)
    ids = undo_masking(features[constants.INPUT_WORD_IDS],
                       features[constants.MASKED_LM_POSITIONS],
                       features[constants.MASKED_LM_IDS],
                       features[constants.MASKED_LM_WEIGHTS])
    features.update(mask_batch(ids, features[constants.INPUT_MASK], tf.stack([seed, 0]),
                               vocab, masked_lm_prob, max_predictions_per_seq, whole_word))
    return features

  return fn
