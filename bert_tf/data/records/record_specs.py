"""The features of the TFRecords the tools write, described once (the record kinds of
bert_tf.data.pipelines.loaders each build theirs from these).

A record spec is a tuple of `RecordFeature`s: the feature's name in the records, its
name in batches, its shape per example, its dtype in the records and its default. The
tf.data readers parse with it (`bert_tf.data.records.tfrecords.parse_records`, through
`tf.io.parse_example`) and the TensorFlow-free reader decodes with it
(`bert_tf.data.records.example_decoding`), so both read the same features into the same batches:
int64 features become int32 arrays (JAX and the models compute in 32 bits), float
features float32. Importing this module needs no TensorFlow.
"""

import dataclasses
import math
from typing import Optional, Tuple

from bert_tf import constants
from bert_tf.data.task_files.squad import END_POSITIONS, IS_IMPOSSIBLE, START_POSITIONS, UNIQUE_IDS

# The dtypes of features in the records.
INT64, FLOAT32 = "int64", "float32"


@dataclasses.dataclass(frozen=True)
class RecordFeature:
  """One fixed-length feature of a tf.train.Example record.

  Attributes:
    name: the feature's name in the records.
    key: its name in batches (the models' input and label names).
    shape: its shape per example; the record holds prod(shape) values.
    dtype: INT64 (an Int64List, read as int32) or FLOAT32 (a FloatList).
    default: the value of a record without the feature; None: the feature is required.
  """

  name: str
  key: str
  shape: Tuple[int, ...]
  dtype: str = INT64
  default: Optional[float] = None

  @property
  def size(self) -> int:
    """The number of values a record holds."""
    return math.prod(self.shape)

  @property
  def batch_dtype(self) -> str:
    """The dtype of the feature in batches: int32 or float32."""
    return "int32" if self.dtype == INT64 else FLOAT32


RecordSpec = Tuple[RecordFeature, ...]


def encoder_inputs(shape: Tuple[int, ...]) -> RecordSpec:
  """input_ids, input_mask and segment_ids of `shape` per example, read as the models'
  input_word_ids, input_mask and input_type_ids."""
  return (RecordFeature(constants.TFRECORD_INPUT_IDS, constants.INPUT_WORD_IDS, shape),
          RecordFeature(constants.TFRECORD_INPUT_MASK, constants.INPUT_MASK, shape),
          RecordFeature(constants.TFRECORD_SEGMENT_IDS, constants.INPUT_TYPE_IDS, shape))


def pretraining_spec(seq_length: int, max_predictions_per_seq: int) -> RecordSpec:
  """The original release's pretraining records (tools/create_pretraining_data.py).

  Batches: input_word_ids, input_mask, input_type_ids int32 [B, S]; masked_lm_positions,
  masked_lm_ids int32 [B, P]; masked_lm_weights float32 [B, P]; next_sentence_labels
  int32 [B].
  """
  names = constants.TFRECORD_TO_MODEL_INPUT
  predictions = (max_predictions_per_seq,)
  return encoder_inputs((seq_length,)) + (
      RecordFeature(constants.TFRECORD_MASKED_LM_POSITIONS,
                    names[constants.TFRECORD_MASKED_LM_POSITIONS], predictions),
      RecordFeature(constants.TFRECORD_MASKED_LM_IDS,
                    names[constants.TFRECORD_MASKED_LM_IDS], predictions),
      RecordFeature(constants.TFRECORD_MASKED_LM_WEIGHTS,
                    names[constants.TFRECORD_MASKED_LM_WEIGHTS], predictions, FLOAT32),
      RecordFeature(constants.TFRECORD_NEXT_SENTENCE_LABELS,
                    names[constants.TFRECORD_NEXT_SENTENCE_LABELS], ()),
  )


def squad_spec(seq_length: int) -> RecordSpec:
  """SQuAD windows as the original release writes them (bert_tf.data.records.squad_records);
  records without labels (evaluation files) read 0 labels.

  Batches: input_word_ids, input_mask, input_type_ids int32 [B, T]; unique_ids,
  start_positions, end_positions, is_impossible int32 [B].
  """
  return ((RecordFeature(UNIQUE_IDS, UNIQUE_IDS, ()),) + encoder_inputs((seq_length,))
          + tuple(RecordFeature(name, name, (), default=0)
                  for name in (START_POSITIONS, END_POSITIONS, IS_IMPOSSIBLE)))
