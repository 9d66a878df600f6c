"""Pretraining records as a record kind: synthetic ones (format "dummy") and the
TFRecords tools/create_pretraining_data.py writes (format "tfrecord",
record_specs.pretraining_spec), with dynamic masking drawn from the batch's place in the
order on both forms (bert_tf.data.pipelines.masking)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional

import numpy as np

from bert_tf import constants
from bert_tf.data.pipelines import dummy
from bert_tf.data.pipelines import host_pipeline
from bert_tf.data.pipelines import masking
from bert_tf.data.pipelines.loaders import registry
from bert_tf.data.records import pretraining_files
from bert_tf.data.records import record_specs
from bert_tf.utils import files

if TYPE_CHECKING:
  import tensorflow as tf  # pylint: disable=g-bad-import-order

PRETRAINING = "pretraining"
# Distinct synthetic batches a "dummy" evaluation input holds (training repeats forever).
DUMMY_EVAL_BATCHES = 4


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
  word_ids, input_mask, lengths = dummy.random_tokens(rng, [batch_size], seq_length,
                                                     vocab_size, seq_length // 2)
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


class DummyPretraining(registry.InMemoryLoader):
  """DUMMY_EVAL_BATCHES global batches of synthetic examples in file order, endless for
  training; training and evaluation draw different ones."""

  in_file_order = True

  def arrays(self):
    return self.kind.dummy_arrays(self.needs, self.data_config)


class PretrainingRecords(registry.DataLoader):
  """Pretraining TFRecords in the order both engines read records; new masks drawn for
  each batch under dynamic_masking."""

  def check_files(self) -> None:
    """Raises PretrainingInputError: no file matches, the first file is empty, or
    seq_length, max_predictions_per_seq or the model's vocab_size disagree with the
    files (the message names both values and the file)."""
    info = pretraining_files.inspect_pretraining_files(self.data_config.input_path,
                                                       self.data_config.compression_type)
    info.check_config(self.data_config, self.needs.vocab_size)
    if self.data_config.dynamic_masking and not self._vocab_file():
      named = (info.summary or {}).get("vocab_file")
      raise pretraining_files.PretrainingInputError(
          "dynamic_masking draws [MASK] and random tokens from the vocab the records were "
          "made with: set tokenizer.vocab_file (" + (
              f"the records' summary names {named}, which does not exist)" if named else
              "the records have no summary naming it)"))

  def settings_from_files(self) -> Dict[str, Any]:
    """The WordPiece vocab (and its casing) the TFRecords were made with, from the JSON
    summary tools/create_pretraining_data.py writes beside them, where tokenizer.vocab_file
    is unset and that vocab is still there."""
    if self.needs.vocab_file:
      return {}
    summary = self._summary()
    vocab_file = self._vocab_file()
    if not vocab_file:
      return {}
    lower_case = summary.get("settings", {}).get("do_lower_case", self.needs.lower_case)
    return {"tokenizer": {"vocab_file": vocab_file, "lower_case": bool(lower_case)}}

  def _summary(self) -> Dict[str, Any]:
    return pretraining_files.inspect_pretraining_files(
        self.data_config.input_path, self.data_config.compression_type).summary or {}

  def _vocab_file(self) -> str:
    """tokenizer.vocab_file, else the vocab the records' summary names where it exists
    ("" where neither is there): dynamic masking's vocab."""
    if self.needs.vocab_file:
      return self.needs.vocab_file
    vocab_file = self._summary().get("vocab_file")
    return vocab_file if vocab_file and files.exists(vocab_file) else ""

  def dataset(self, input_context: Optional[tf.distribute.InputContext] = None,
              start: int = 0) -> tf.data.Dataset:
    """bert_tf.data.pipelines.pretraining_reader.build_pretraining_dataset."""
    return registry.tf_data().pretraining_reader.build_pretraining_dataset(
        self.data_config, input_context, vocab_file=self._vocab_file(),
        seed=self.needs.seed, start=start, vocab_size=self.needs.vocab_size)

  def _host_batches(self, batch_size, order):
    data = self.data_config
    draw = None
    if data.dynamic_masking:
      draw = masking.DynamicMasking.of(data, self._vocab_file(), order["seed"])
    return host_pipeline.record_batches(
        pretraining_files.list_record_files(data.input_path), self.kind.spec(self.needs, data),
        batch_size, compression_type=data.compression_type, draw=draw, **order)


class PretrainingKind(registry.RecordKind):
  """Masked-LM and next-sentence examples (record_specs.pretraining_spec)."""

  name = PRETRAINING
  formats = {registry.DUMMY: DummyPretraining, registry.TFRECORD: PretrainingRecords}

  def spec(self, needs, data_config):
    return record_specs.pretraining_spec(data_config.seq_length,
                                         data_config.max_predictions_per_seq, needs.vocab_size)

  def dummy_arrays(self, needs, data_config):
    """DUMMY_EVAL_BATCHES global batches; training and evaluation draw different ones."""
    return pretraining_examples(
        data_config.global_batch_size, data_config.seq_length,
        data_config.max_predictions_per_seq, needs.vocab_size,
        num_distinct_batches=DUMMY_EVAL_BATCHES, seed=0 if data_config.is_training else 1000)


KIND = registry.register_kind(PretrainingKind())
