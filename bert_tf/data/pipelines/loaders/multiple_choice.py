"""Records of a context and its endings, one sequence per choice (SWAG), read from
SWAG CSV files (bert_tf.data.task_files.swag)."""

from __future__ import annotations

import numpy as np

from bert_tf import constants
from bert_tf.data.pipelines.loaders import features
from bert_tf.data.pipelines.loaders import registry
from bert_tf.data.records import record_specs

MULTIPLE_CHOICE = "multiple_choice"


class MultipleChoiceKind(features.FeatureKind):
  """Encoder inputs int32 [B, C, T] for options["num_choices"] C; label_ids int32 [B],
  the right choice."""

  name = MULTIPLE_CHOICE
  raw_formats = ("swag_csv",)

  def token_shape(self, needs, seq_length):
    return (needs.options["num_choices"], seq_length)

  def label_feature(self, needs, seq_length):
    return record_specs.RecordFeature(constants.LABEL_IDS, constants.LABEL_IDS, ())

  def dummy_labels(self, rng, needs, mask):
    return {constants.LABEL_IDS: rng.integers(0, needs.options["num_choices"],
                                              size=[len(mask)]).astype(np.int32)}

  def featurize(self, needs, examples, seq_length):
    """featurizers.multiple_choice_dataset."""
    return registry.tf_data().featurizers.multiple_choice_dataset(
        examples, self.tokenizer(needs), seq_length, needs.options["num_choices"])

  def tfrecord_metadata(self, needs):
    return dict(super().tfrecord_metadata(needs), num_choices=needs.options["num_choices"])


KIND = registry.register_kind(MultipleChoiceKind())
