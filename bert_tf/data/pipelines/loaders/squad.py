"""SQuAD windows as a record kind: synthetic ones (format "dummy"), the original
release's records (format "tfrecord", `squad_spec`, written by
bert_tf.data.records.squad_records) and the windows of a SQuAD JSON file (format
"squad_json", read by bert_tf.data.task_files.squad and cut into windows by
bert_tf.data.pipelines.squad_features), created once: the task's evaluation reports
need them too, and get them, with the answers the official scoring reads, from the kind
(`SquadKind.questions`), so that the task reads no file."""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from bert_tf import configs
from bert_tf import constants
from bert_tf.data.pipelines import dummy
from bert_tf.data.pipelines import host_pipeline
from bert_tf.data.pipelines.loaders import registry
from bert_tf.data.records import record_specs
from bert_tf.data.task_files import readers
from bert_tf.data.task_files import squad
from bert_tf.utils import files

if TYPE_CHECKING:
  import tensorflow as tf  # pylint: disable=g-bad-import-order

SQUAD = "squad"
SQUAD_JSON = "squad_json"


def squad_spec(seq_length: int, vocab_size: int = 0) -> record_specs.RecordSpec:
  """SQuAD windows as the original release writes them
  (bert_tf.data.records.squad_records); records without labels (evaluation files) read 0 labels; input_ids below vocab_size
  where it is given.

  Batches: input_word_ids, input_mask, input_type_ids int32 [B, T]; unique_ids,
  start_positions, end_positions, is_impossible int32 [B].
  """
  labels = (squad.START_POSITIONS, squad.END_POSITIONS, squad.IS_IMPOSSIBLE)
  return ((record_specs.RecordFeature(squad.UNIQUE_IDS, squad.UNIQUE_IDS, ()),)
          + record_specs.encoder_inputs((seq_length,), vocab_size)
          + tuple(record_specs.RecordFeature(name, name, (), default=0) for name in labels))


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
  ids, mask, lengths = dummy.random_tokens(rng, [num_examples], seq_length, vocab_size,
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


class DummyWindows(registry.InMemoryLoader):
  """Synthetic windows in file order."""

  in_file_order = True

  def arrays(self):
    return self.kind.dummy_arrays(self.needs, self.data_config)


class WindowRecords(registry.DataLoader):
  """Windows of SQuAD records, in the order both engines read records."""

  def _paths(self):
    return files.expand_patterns(self.data_config.input_path,
                                 field=f"{self.data_config.section_name()}.input_path")

  def dataset(self, input_context: Optional[tf.distribute.InputContext] = None,
              start: int = 0) -> tf.data.Dataset:
    return registry.tf_data().tfrecords.ordered_record_dataset(
        self._paths(), self.kind.spec(self.needs, self.data_config), self.data_config,
        self.needs.seed, input_context, start)

  def _host_batches(self, batch_size, order):
    return host_pipeline.record_batches(
        self._paths(), self.kind.spec(self.needs, self.data_config), batch_size,
        compression_type=self.data_config.compression_type, **order)


class JsonWindows(registry.InMemoryLoader):
  """The windows of the questions of a SQuAD JSON file (tokenized by tensorflow-text),
  numbered in file order, read in the order both engines read records."""

  def arrays(self):
    _, windows = self.kind.windows(self.needs, self.data_config)
    if not windows:
      raise ValueError(f"{self.data_config.input_path}: no SQuAD questions to read")
    return registry.tf_data().squad_features.features_to_arrays(windows)


@dataclasses.dataclass(frozen=True)
class Questions:
  """The questions of a SQuAD JSON file, as evaluation answers and scores them.

  Attributes:
    examples: the questions (SquadExample), in file order.
    windows: their windows (SquadFeatures) of the data section's seq_length, whose
      unique_ids the model's logits are gathered by.
    articles: the file's `data` list, where the official scoring
      (bert_tf.metrics.squad) reads each question's answers.
  """

  examples: List[squad.SquadExample]
  windows: List[squad.SquadFeatures]
  articles: List[Mapping[str, Any]]


class SquadKind(registry.RecordKind):
  """Windows of a question and its context: encoder inputs int32 [B, T]; unique_ids,
  start_positions, end_positions, is_impossible int32 [B]. The task's options give
  doc_stride, max_query_length and version_2_with_negative."""

  name = SQUAD
  formats = {registry.DUMMY: DummyWindows, registry.TFRECORD: WindowRecords,
             SQUAD_JSON: JsonWindows}

  def spec(self, needs, data_config):
    return squad_spec(data_config.seq_length, needs.vocab_size)

  def dummy_arrays(self, needs, data_config):
    num = max(4 * data_config.global_batch_size, 64) if data_config.is_training else (
        2 * data_config.global_batch_size)
    return span_arrays(num, data_config.seq_length, needs.vocab_size)

  def windows(self, needs: registry.InputNeeds, data_config: configs.DataConfig
              ) -> Tuple[List[squad.SquadExample], List[squad.SquadFeatures]]:
    """The questions of the SQuAD JSON file data_config.input_path and their windows
    of data_config.seq_length, once per file, length and mode (is_training)."""
    key = (SQUAD_JSON, data_config.input_path, data_config.seq_length,
           data_config.is_training)
    return needs.cached(key, lambda: self._windows(needs, data_config))

  def questions(self, needs: registry.InputNeeds, data_config: configs.DataConfig
                ) -> Questions:
    """The questions of the SQuAD JSON file data_config.input_path, their windows of
    data_config.seq_length and the file's answers, once per file, length and mode."""
    key = (SQUAD_JSON, "articles", data_config.input_path)
    articles = needs.cached(key, lambda: squad.load_squad_json(data_config.input_path))
    return Questions(*self.windows(needs, data_config), articles)

  def _windows(self, needs, data_config):
    if not needs.vocab_file:
      raise configs.ConfigError("Reading SQuAD JSON needs tokenizer.vocab_file")
    tf_data = registry.tf_data()
    examples = readers.read_examples(data_config.replace(format=SQUAD_JSON), needs.options)
    tokenizer = tf_data.tokenizer.BertWordPieceTokenizer(needs.vocab_file,
                                                         lower_case=needs.lower_case)
    vocab_list = tf_data.vocab.load_vocab(needs.vocab_file)
    windows = tf_data.squad_features.convert_examples_to_features(
        examples, tf_data.squad_features.tokenize_fn_from_tokenizer(tokenizer),
        {t: i for i, t in enumerate(vocab_list)}, max_seq_length=data_config.seq_length,
        doc_stride=needs.options["doc_stride"],
        max_query_length=needs.options["max_query_length"])
    logging.info("%s: %d questions, %d windows", data_config.input_path, len(examples),
                 len(windows))
    return examples, windows


KIND = registry.register_kind(SquadKind())
