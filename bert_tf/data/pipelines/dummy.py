"""Synthetic batches of every task's structure, for tests and smoke runs without data.

The inputs are well formed (ids above the special tokens' 0-4 inside each example's
length, padding 0 after it); the labels are random but valid for their task. They are
drawn in NumPy (importing this module needs no TensorFlow) and served by tf.data or by
the host input (bert_tf.data.pipelines.host_pipeline) alike.
"""

from typing import Callable, Dict, Tuple

import numpy as np

from bert_tf import constants
from bert_tf.data.task_files import squad


def pretraining_arrays(batch_size: int, seq_length: int, max_predictions: int,
                       vocab_size: int, seed: int = 0) -> Dict[str, np.ndarray]:
  """One batch of well-formed pretraining features, as NumPy arrays.

  Every example has a random length in [seq_length // 2, seq_length], two segments,
  and `max_predictions // 2` or more real masked positions among its non-special
  tokens (ids 0..4 are left to the special tokens).

  Returns:
    input_word_ids, input_mask, input_type_ids int32 [B, T]; masked_lm_positions,
    masked_lm_ids int32 [B, P]; masked_lm_weights float32 [B, P]; next_sentence_labels
    int32 [B].
  """
  rng = np.random.default_rng(seed)
  word_ids, input_mask, lengths = _random_tokens(rng, [batch_size], seq_length, vocab_size,
                                                 seq_length // 2)
  positions = np.arange(seq_length)[None, :]
  type_ids = ((positions >= (lengths // 2)[:, None]) * input_mask).astype(np.int32)
  # Masked positions: distinct, sorted, inside each sequence (skipping [CLS] at 0).
  scores = rng.uniform(size=[batch_size, seq_length])
  scores = np.where((positions > 0) & (positions < lengths[:, None] - 1), scores, -1.0)
  top = np.sort(np.argsort(-scores, axis=-1, kind="stable")[:, :max_predictions], axis=-1)
  num_real = np.maximum(max_predictions // 2,
                        rng.integers(0, max_predictions + 1, size=[batch_size]))
  weights = (np.arange(max_predictions)[None, :] < num_real[:, None]).astype(np.float32)
  real = weights.astype(np.int32)
  return {
      constants.INPUT_WORD_IDS: word_ids,
      constants.INPUT_MASK: input_mask,
      constants.INPUT_TYPE_IDS: type_ids,
      constants.MASKED_LM_POSITIONS: (top * real).astype(np.int32),
      constants.MASKED_LM_IDS: np.take_along_axis(word_ids, top, axis=1) * real,
      constants.MASKED_LM_WEIGHTS: weights,
      constants.NEXT_SENTENCE_LABELS: rng.integers(0, 2, size=[batch_size]).astype(
          np.int32),
  }


def pretraining_examples(batch_size: int, seq_length: int, max_predictions: int,
                         vocab_size: int, num_distinct_batches: int = 4,
                         seed: int = 0) -> Dict[str, np.ndarray]:
  """`num_distinct_batches` synthetic batches (seeds seed, seed + 1, ...) as one set of
  examples: arrays [num_distinct_batches * batch_size, ...]."""
  batches = [pretraining_arrays(batch_size, seq_length, max_predictions, vocab_size,
                                seed + i) for i in range(num_distinct_batches)]
  return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def _random_tokens(rng: np.random.Generator, shape, seq_length: int, vocab_size: int,
                   min_length: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(ids int32 [*shape, T], mask int32 [*shape, T], lengths int [*shape]) with each
  length drawn from [min_length, seq_length]."""
  lengths = rng.integers(min_length, seq_length + 1, size=shape)
  mask = (np.arange(seq_length) < lengths[..., None]).astype(np.int32)
  ids = rng.integers(5, vocab_size, size=[*shape, seq_length]).astype(np.int32) * mask
  return ids, mask, lengths


def finetuning_examples(draw_labels: Callable[[np.random.Generator, np.ndarray],
                                             Dict[str, np.ndarray]],
                        batch_size: int, seq_length: int, vocab_size: int, choices: int = 0,
                        seed: int = 0, num_distinct_batches: int = 4
                        ) -> Dict[str, np.ndarray]:
  """`num_distinct_batches` synthetic batches of featurized examples as one set of
  examples.

  Args:
    draw_labels: (rng, input_mask int32 [B, T] or [B, C, T]) -> the batch's label
      features (label_ids and any other), random but valid (a record kind's
      dummy_labels).
    choices: sequences per example ([B, C, T] inputs); 0: [B, T].

  Returns:
    arrays [num_distinct_batches * batch_size, ...] padded to seq_length: the encoder
    inputs, example_index (counting within each batch) and the labels drawn.
  """
  rng = np.random.default_rng(seed)
  shape = [batch_size, choices] if choices else [batch_size]
  batches = []
  for _ in range(num_distinct_batches):
    ids, mask, lengths = _random_tokens(rng, shape, seq_length, vocab_size,
                                        max(3, seq_length // 2))
    type_ids = ((np.arange(seq_length) >= (lengths[..., None] // 2)) * mask).astype(np.int32)
    batch = {
        constants.INPUT_WORD_IDS: ids, constants.INPUT_MASK: mask,
        constants.INPUT_TYPE_IDS: type_ids,
        constants.EXAMPLE_INDEX: np.arange(batch_size, dtype=np.int32),
    }
    batch.update(draw_labels(rng, mask))
    batches.append(batch)
  return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


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
