"""Masked-LM masks drawn as batches are read (RoBERTa-style dynamic masking): one NumPy
implementation that both engines' inputs apply to the batches they read (the host input
directly, tf.data in a tf.numpy_function), so that it needs no TensorFlow.

The rule is create_pretraining_data's, the original BERT release's
(bert_tf.data.creation.pretraining_instances.mask_sequences): candidates are every real token
except [CLS] and [SEP]; min(max_predictions, max(1, round(length * masked_lm_prob))) of
them are predicted (length counts [CLS]/[SEP], round is half to even); with whole-word
masking a "##" piece joins the word before it and words are taken in random order while
they fit; of the chosen positions 80% become [MASK], 10% a random id, 10% stay;
positions are sorted.

A batch's masks are drawn from (seed, batch number) for the whole global batch, of which
each process or replica keeps its rows' draws: the same masks on both engines however
the batch is shared, new every epoch, and a resumed run draws the masks an uninterrupted
one draws.
Sequences read from files that were masked when written are first unmasked with
`undo_masking` (the original ids are put back from masked_lm_ids), so files from either
tool serve.
"""

from typing import Dict

import numpy as np

from bert_tf import constants
from bert_tf.data.creation import pretraining_instances
from bert_tf.data.records import record_order
from bert_tf.data.creation.pretraining_instances import SpecialIds
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


def undo_masking(input_word_ids: np.ndarray, masked_lm_positions: np.ndarray,
                 masked_lm_ids: np.ndarray, masked_lm_weights: np.ndarray) -> np.ndarray:
  """int32 [B, S]: `input_word_ids` with the original ids put back at the masked
  positions (slots of weight 0, padding, are left alone).

  Args:
    input_word_ids: int32 [B, S]; masked_lm_positions, masked_lm_ids: int32 [B, P];
    masked_lm_weights: float32 [B, P].
  """
  out = np.array(input_word_ids, np.int32)
  rows, slots = np.nonzero(np.asarray(masked_lm_weights) > 0)
  out[rows, masked_lm_positions[rows, slots]] = masked_lm_ids[rows, slots]
  return out


class _GlobalBatchDraws:
  """What `pretraining_instances.mask_sequences` draws from a np.random.Generator, drawn
  for all `global_rows` rows of the global batch, of which the rows `offsets` are
  returned: a part of the batch gets the draws its rows get in the whole batch."""

  def __init__(self, rng: np.random.Generator, global_rows: int, offsets: np.ndarray):
    self._rng = rng
    self._global_rows = global_rows
    self._offsets = offsets

  def random(self, size):
    return self._rng.random((self._global_rows, *size[1:]))[self._offsets]

  def integers(self, low, high, size, dtype):
    return self._rng.integers(low, high, size=(self._global_rows, *size[1:]),
                              dtype=dtype)[self._offsets]


class DynamicMasking:
  """Draws new masks for batches of pretraining features (bert_tf.constants names).

  Args:
    vocab: the special ids, vocab size and "##" pieces.
    masked_lm_prob: fraction of tokens to predict.
    max_predictions_per_seq: P.
    whole_word: mask whole words.
    seed: of the draws (runtime.seed; any int, taken modulo 2**64).
    global_batch_size: rows of a global batch, whose draws its parts share.
  """

  def __init__(self, vocab: SpecialIds, masked_lm_prob: float,
               max_predictions_per_seq: int, whole_word: bool = False, seed: int = 0,
               global_batch_size: int = 0):
    self.vocab = vocab
    self.masked_lm_prob = masked_lm_prob
    self.max_predictions_per_seq = max_predictions_per_seq
    self.whole_word = whole_word
    self.seed = int(seed) % 2**64
    self.global_batch_size = global_batch_size

  @classmethod
  def of(cls, data_config, vocab_file: str, seed: int) -> "DynamicMasking":
    """The masking a data section (bert_tf.configs.DataConfig) asks for."""
    return cls(read_masking_vocab(vocab_file), data_config.masked_lm_prob,
               data_config.max_predictions_per_seq, data_config.whole_word_masking, seed,
               data_config.global_batch_size)

  def mask(self, input_word_ids: np.ndarray, input_mask: np.ndarray,
           rng: np.random.Generator) -> Dict[str, np.ndarray]:
    """Masks unmasked sequences int32 [B, S] (input_mask int32 [B, S]) with the draws
    of `rng`.

    Returns:
      input_word_ids int32 [B, S] (masked), masked_lm_positions int32 [B, P] (sorted,
      0-padded), masked_lm_ids int32 [B, P] (original ids, 0-padded), masked_lm_weights
      float32 [B, P].
    """
    candidates = ((input_mask > 0) & (input_word_ids != self.vocab.cls_id) &
                  (input_word_ids != self.vocab.sep_id))
    masked = pretraining_instances.mask_sequences(
        input_word_ids, input_mask, candidates, self.masked_lm_prob,
        self.max_predictions_per_seq, self.vocab, rng, self.whole_word)
    return {constants.INPUT_WORD_IDS: masked.input_ids,
            constants.MASKED_LM_POSITIONS: masked.masked_lm_positions,
            constants.MASKED_LM_IDS: masked.masked_lm_ids,
            constants.MASKED_LM_WEIGHTS: masked.masked_lm_weights}

  def __call__(self, batch: Dict[str, np.ndarray], batch_number: int,
               offsets: np.ndarray) -> Dict[str, np.ndarray]:
    """`batch` with its masks undone and new ones drawn from (seed, batch_number).

    Args:
      batch: pretraining features [b, ...].
      batch_number: the global batch it is (a part) of.
      offsets: int64 [b], its rows' places in the global batch
        (bert_tf.data.records.record_order.RecordOrder.offsets).
    """
    ids = undo_masking(batch[constants.INPUT_WORD_IDS], batch[constants.MASKED_LM_POSITIONS],
                       batch[constants.MASKED_LM_IDS], batch[constants.MASKED_LM_WEIGHTS])
    rng = np.random.default_rng([self.seed, record_order.MASK_DRAWS, int(batch_number)])
    draws = _GlobalBatchDraws(rng, max(self.global_batch_size, len(ids)), offsets)
    return dict(batch, **self.mask(ids, np.asarray(batch[constants.INPUT_MASK]), draws))
