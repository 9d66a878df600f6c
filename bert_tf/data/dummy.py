"""Synthetic batches of every task's structure, for tests and smoke runs without data.

The inputs are well formed (ids above the special tokens' 0-4 inside each example's
length, padding 0 after it); the labels are random but valid for their task.
"""

from typing import Dict, Tuple

import numpy as np
import tensorflow as tf

from bert_tf import constants
from bert_tf.data import squad
from bert_tf.data.featurizers import MULTIPLE_CHOICE, TAGGING


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


def _random_tokens(rng: np.random.Generator, shape, seq_length: int, vocab_size: int,
                   min_length: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(ids int32 [*shape, T], mask int32 [*shape, T], lengths int [*shape]) with each
  length drawn from [min_length, seq_length]."""
  lengths = rng.integers(min_length, seq_length + 1, size=shape)
  mask = (np.arange(seq_length) < lengths[..., None]).astype(np.int32)
  ids = rng.integers(5, vocab_size, size=[*shape, seq_length]).astype(np.int32) * mask
  return ids, mask, lengths


def finetuning_dataset(kind: str, batch_size: int, seq_length: int, vocab_size: int,
                       num_classes: int, num_choices: int = 1, regression: bool = False,
                       seed: int = 0, num_distinct_batches: int = 4) -> tf.data.Dataset:
  """Endless synthetic batches of the structure `kind`'s real batches have.

  Args:
    kind: one of `bert_tf.data.featurizers.KINDS`.
    num_classes: classes (or tags) the labels are drawn from.

  Returns:
    A dataset cycling over `num_distinct_batches` batches as `bert_tf.data.batching`
    describes them, padded to seq_length.
  """
  rng = np.random.default_rng(seed)
  shape = [batch_size, num_choices] if kind == MULTIPLE_CHOICE else [batch_size]
  batches = []
  for _ in range(num_distinct_batches):
    ids, mask, lengths = _random_tokens(rng, shape, seq_length, vocab_size,
                                        max(3, seq_length // 2))
    type_ids = ((np.arange(seq_length) >= (lengths[..., None] // 2)) * mask).astype(np.int32)
    if kind == TAGGING:
      labels = rng.integers(0, num_classes, size=ids.shape).astype(np.int32)
      labels = np.where(mask > 0, labels, constants.IGNORE_LABEL).astype(np.int32)
      labels[:, 0] = constants.IGNORE_LABEL
    elif kind == MULTIPLE_CHOICE:
      labels = rng.integers(0, num_choices, size=[batch_size]).astype(np.int32)
    elif regression:
      labels = rng.uniform(0, 1, size=[batch_size]).astype(np.float32)
    else:
      labels = rng.integers(0, num_classes, size=[batch_size]).astype(np.int32)
    batch = {
        constants.INPUT_WORD_IDS: ids, constants.INPUT_MASK: mask,
        constants.INPUT_TYPE_IDS: type_ids, constants.LABEL_IDS: labels,
        constants.EXAMPLE_INDEX: np.arange(batch_size, dtype=np.int32),
    }
    if kind == TAGGING:
      batch[constants.WINDOW_INDEX] = np.zeros([batch_size], np.int32)
    batches.append(batch)
  stacked = {k: np.stack([b[k] for b in batches]) for k in batches[0]}
  return tf.data.Dataset.from_tensor_slices(stacked).repeat()


def span_arrays(num_examples: int, seq_length: int, vocab_size: int, seed: int = 0
                ) -> Dict[str, np.ndarray]:
  """Synthetic SQuAD features: a query of seq_length // 4 tokens, then the context, and
  an answer span of up to three tokens inside the context.

  Returns:
    input_word_ids, input_mask, input_type_ids int32 [N, T]; unique_ids,
    start_positions, end_positions, is_impossible int32 [N].
  """
  rng = np.random.default_rng(seed)
  query_length = max(1, seq_length // 4)
  ids, mask, lengths = _random_tokens(rng, [num_examples], seq_length, vocab_size,
                                      query_length + 4)
  types = ((np.arange(seq_length)[None, :] > query_length) & (mask == 1)).astype(np.int32)
  starts = rng.integers(query_length + 2, lengths - 1)
  ends = np.minimum(starts + rng.integers(0, 3, size=num_examples), lengths - 2)
  return {
      constants.INPUT_WORD_IDS: ids,
      constants.INPUT_MASK: mask,
      constants.INPUT_TYPE_IDS: types,
      squad.UNIQUE_IDS: (squad.FIRST_UNIQUE_ID + np.arange(num_examples)).astype(np.int32),
      squad.START_POSITIONS: starts.astype(np.int32),
      squad.END_POSITIONS: ends.astype(np.int32),
      squad.IS_IMPOSSIBLE: np.zeros(num_examples, np.int32),
  }
