"""Records of one sentence or a sentence pair with a class or a score (GLUE and the
like), read from TSV, CSV (bert_tf.data.task_files.glue) or TFDS GLUE
(bert_tf.data.task_files.tfds_glue)."""

from __future__ import annotations

import numpy as np

from bert_tf import constants
from bert_tf.data.pipelines.loaders import features
from bert_tf.data.pipelines.loaders import registry
from bert_tf.data.records import record_specs

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
    """featurizers.sentence_dataset."""
    return registry.tf_data().featurizers.sentence_dataset(
        examples, self.tokenizer(needs), seq_length, label_ids(examples, needs),
        needs.regression)


KIND = registry.register_kind(SentenceKind())
