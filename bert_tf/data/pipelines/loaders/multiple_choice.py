"""Records of a context and its endings, one sequence per choice (SWAG), read from
SWAG CSV files (bert_tf.data.task_files.swag)."""

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

MULTIPLE_CHOICE = "multiple_choice"


def multiple_choice_dataset(examples: Sequence, tokenizer: featurizers.PieceTokenizer,
                            seq_length: int, num_choices: int) -> tf.data.Dataset:
  """Featurizes MultipleChoiceExamples: [CLS] context [SEP] ending [SEP] per choice.

  Returns:
    Dataset of dicts: input_word_ids, input_mask, input_type_ids (int32 [C, T_i]),
    label_ids (int32 scalar; 0 when unlabelled), example_index.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.data.pipelines import featurizers  # pylint: disable=g-import-not-at-top

  for e in examples:
    if len(e.endings) != num_choices:
      raise ValueError(f"Example {e.index} has {len(e.endings)} endings, expected "
                       f"{num_choices}")
  data = {
      "context": [e.context for e in examples],
      "endings": [list(e.endings) for e in examples],
      constants.LABEL_IDS: np.asarray([e.label or 0 for e in examples], np.int32),
      constants.EXAMPLE_INDEX: np.asarray([e.index for e in examples], np.int32),
  }

  def featurize(batch):
    contexts = tf.repeat(batch["context"], num_choices)
    endings = tf.reshape(batch["endings"], [-1])
    packed = featurizers.pack(
        tokenizer, [tokenizer.piece_ids(contexts), tokenizer.piece_ids(endings)], seq_length)
    out = {k: tf.RaggedTensor.from_uniform_row_length(v, num_choices)
           for k, v in packed.items()}
    out[constants.LABEL_IDS] = batch[constants.LABEL_IDS]
    out[constants.EXAMPLE_INDEX] = batch[constants.EXAMPLE_INDEX]
    return out

  return featurizers.featurize_in_batches(data, featurize, len(examples))


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
    """multiple_choice_dataset."""
    return multiple_choice_dataset(
        examples, self.tokenizer(needs), seq_length, needs.options["num_choices"])

  def tfrecord_metadata(self, needs):
    return dict(super().tfrecord_metadata(needs), num_choices=needs.options["num_choices"])


KIND = registry.register_kind(MultipleChoiceKind())
