"""Records of a sentence's words tagged at their first piece, in windows (CoNLL), read
from CoNLL files (bert_tf.data.task_files.conll)."""

from __future__ import annotations

import numpy as np

from bert_tf import constants
from bert_tf.data.pipelines.loaders import features
from bert_tf.data.pipelines.loaders import registry
from bert_tf.data.records import record_specs

TAGGING = "tagging"


class TaggingKind(features.FeatureKind):
  """label_ids: int32 tag ids [B, T], constants.IGNORE_LABEL where no word is scored;
  window_index int32 [B], the window's place in its sentence."""

  name = TAGGING
  raw_formats = ("conll",)

  def label_feature(self, needs, seq_length):
    return self.token_feature(needs, seq_length, constants.LABEL_IDS,
                              fill=constants.IGNORE_LABEL)

  def extra_features(self, needs, seq_length):
    return (record_specs.RecordFeature(constants.WINDOW_INDEX, constants.WINDOW_INDEX, (),
                                       default=0),)

  def dummy_labels(self, rng, needs, mask):
    labels = rng.integers(0, len(needs.label_names), size=mask.shape).astype(np.int32)
    labels = np.where(mask > 0, labels, constants.IGNORE_LABEL).astype(np.int32)
    labels[:, 0] = constants.IGNORE_LABEL
    return {constants.LABEL_IDS: labels,
            constants.WINDOW_INDEX: np.zeros([len(mask)], np.int32)}

  def featurize(self, needs, examples, seq_length):
    """featurizers.tagging_dataset, in windows options["window_stride"] pieces apart."""
    return registry.tf_data().featurizers.tagging_dataset(
        examples, self.tokenizer(needs), seq_length, needs.label_names,
        needs.options["window_stride"])


KIND = registry.register_kind(TaggingKind())
