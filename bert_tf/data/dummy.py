"""Synthetic pretraining batches, for tests and smoke runs without data."""

import tensorflow as tf

from bert_tf import constants


def dummy_pretraining_batch(batch_size: int, seq_length: int, max_predictions: int,
                            vocab_size: int, seed: int = 0):
  """One batch of well-formed pretraining features.

  Every example has a random length in [seq_length // 2, seq_length], two segments,
  and `max_predictions // 2` or more real masked positions among its non-special
  tokens (ids 0..4 are left to the special tokens).

  Returns:
    dict of tensors: input_word_ids, input_mask, input_type_ids (int32 [B, T]),
    masked_lm_positions, masked_lm_ids (int32 [B, P]), masked_lm_weights (float32
    [B, P]), next_sentence_labels (int32 [B]).
  """
  g = tf.random.Generator.from_seed(seed)
  lengths = g.uniform([batch_size], seq_length // 2, seq_length + 1, dtype=tf.int32)
  positions = tf.range(seq_length)[None, :]
  input_mask = tf.cast(positions < lengths[:, None], tf.int32)
  word_ids = g.uniform([batch_size, seq_length], 5, vocab_size, dtype=tf.int32) * input_mask
  split = lengths // 2
  type_ids = tf.cast(positions >= split[:, None], tf.int32) * input_mask
  # Masked positions: distinct, sorted, inside each sequence (skipping [CLS] at 0).
  scores = g.uniform([batch_size, seq_length])
  scores = tf.where((positions > 0) & (positions < lengths[:, None] - 1), scores, -1.0)
  top = tf.sort(tf.math.top_k(scores, k=max_predictions).indices, axis=-1)
  num_real = tf.maximum(max_predictions // 2,
                        g.uniform([batch_size], 0, max_predictions + 1, dtype=tf.int32))
  weights = tf.cast(tf.range(max_predictions)[None, :] < num_real[:, None], tf.float32)
  masked_ids = tf.gather(word_ids, top, batch_dims=1)
  masked_positions = top * tf.cast(weights, tf.int32)
  masked_ids = masked_ids * tf.cast(weights, tf.int32)
  return {
      constants.INPUT_WORD_IDS: word_ids,
      constants.INPUT_MASK: input_mask,
      constants.INPUT_TYPE_IDS: type_ids,
      constants.MASKED_LM_POSITIONS: masked_positions,
      constants.MASKED_LM_IDS: masked_ids,
      constants.MASKED_LM_WEIGHTS: weights,
      constants.NEXT_SENTENCE_LABELS: g.uniform([batch_size], 0, 2, dtype=tf.int32),
  }


def dummy_pretraining_dataset(batch_size: int, seq_length: int, max_predictions: int,
                              vocab_size: int, num_distinct_batches: int = 4,
                              seed: int = 0) -> tf.data.Dataset:
  """An endless dataset cycling over `num_distinct_batches` synthetic batches."""
  batches = [dummy_pretraining_batch(batch_size, seq_length, max_predictions, vocab_size,
                                     seed + i) for i in range(num_distinct_batches)]
  stacked = {k: tf.stack([b[k] for b in batches]) for k in batches[0]}
  return tf.data.Dataset.from_tensor_slices(stacked).repeat()
