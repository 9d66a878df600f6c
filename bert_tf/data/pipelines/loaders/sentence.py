"""Records of one sentence or a sentence pair with a class or a score (GLUE and the
like), read from TSV, CSV (bert_tf.data.task_files.glue) or TFDS GLUE
(bert_tf.data.task_files.tfds_glue)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from bert_tf import constants
from bert_tf.data.pipelines.loaders import features
from bert_tf.data.pipelines.loaders import registry
from bert_tf.data.records import record_specs

if TYPE_CHECKING:
  import tensorflow as tf  # pylint: disable=g-bad-import-order
  from bert_tf.data.pipelines import featurizers  # pylint: disable=g-bad-import-order

SENTENCE = "sentence"


def label_ids(examples, needs: registry.InputNeeds) -> np.ndarray:
  """Class ids (int32, by needs.label_names) or scores (float32, with needs.regression)
  of SentenceExamples; 0 for unlabelled ones."""
  if needs.regression:
    return np.asarray([e.label if e.label is not None else 0.0 for e in examples], np.float32)
  index = {name: i for i, name in enumerate(needs.label_names)}
  out = []
  for e in examples:
    if e.label is not None and e.label not in index:
      raise ValueError(f"Example {e.index}: label '{e.label}' is not in label_names "
                       f"{list(needs.label_names)}")
    out.append(index.get(e.label, 0))
  return np.asarray(out, np.int32)


def sentence_dataset(examples: Sequence, tokenizer: featurizers.PieceTokenizer,
                     seq_length: int, label_ids: Sequence,  # pylint: disable=redefined-outer-name
                     regression: bool) -> tf.data.Dataset:
  """Featurizes SentenceExamples.

  Args:
    examples: bert_tf.data.task_files.glue.SentenceExample list.
    tokenizer: a PieceTokenizer.
    seq_length: the longest packed sequence, [CLS] and [SEP]s included.
    label_ids: per example, the class id (int) or score (float).
    regression: whether labels are float scores.

  Returns:
    Dataset of dicts: input_word_ids, input_mask, input_type_ids (int32 [T_i]),
    label_ids (int32 or float32 scalar), example_index (int32 scalar).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.data.pipelines import featurizers  # pylint: disable=g-import-not-at-top

  pair = any(e.text_b is not None for e in examples)
  data = {
      "text_a": [e.text_a for e in examples],
      "text_b": [e.text_b or "" for e in examples],
      constants.LABEL_IDS: np.asarray(label_ids, np.float32 if regression else np.int32),
      constants.EXAMPLE_INDEX: np.asarray([e.index for e in examples], np.int32),
  }

  def featurize(batch):
    segments = [tokenizer.piece_ids(batch["text_a"])]
    if pair:
      segments.append(tokenizer.piece_ids(batch["text_b"]))
    return dict(featurizers.pack(tokenizer, segments, seq_length), **{
        constants.LABEL_IDS: batch[constants.LABEL_IDS],
        constants.EXAMPLE_INDEX: batch[constants.EXAMPLE_INDEX],
    })

  return featurizers.featurize_in_batches(data, featurize, len(examples))


class SentenceKind(features.FeatureKind):
  """label_ids: an int32 class id [B], or a float32 score [B] with needs.regression."""

  name = SENTENCE
  raw_formats = ("tsv", "csv", "tfds")

  def label_feature(self, needs, seq_length):
    return record_specs.RecordFeature(
        constants.LABEL_IDS, constants.LABEL_IDS, (),
        record_specs.FLOAT32 if needs.regression else record_specs.INT64)

  def dummy_labels(self, rng, needs, mask):
    if needs.regression:
      return {constants.LABEL_IDS: rng.uniform(0, 1, size=[len(mask)]).astype(np.float32)}
    return {constants.LABEL_IDS: rng.integers(0, max(len(needs.label_names), 1),
                                              size=[len(mask)]).astype(np.int32)}

  def featurize(self, needs, examples, seq_length):
    """sentence_dataset."""
    return sentence_dataset(
        examples, self.tokenizer(needs), seq_length, label_ids(examples, needs),
        needs.regression)


KIND = registry.register_kind(SentenceKind())
