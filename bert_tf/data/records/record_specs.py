"""The features of TFRecords, described once: what a record spec is, the encoder
inputs every record kind's records begin with, and the original release's pretraining
records (which the creation tools, the readers and the baselines share); each record
kind of bert_tf.data.pipelines.loaders builds its spec from these.

A record spec is a tuple of `RecordFeature`s: the feature's name in the records, its
name in batches, its shape per example, its dtype in the records and its default. The
tf.data readers parse with it (`bert_tf.data.records.tfrecords.parse_records`, through
`tf.io.parse_example`) and the TensorFlow-free reader decodes with it
(`bert_tf.data.records.example_decoding`), so both read the same features into the same batches:
int64 features become int32 arrays (JAX and the models compute in 32 bits), float
features float32. A token-id feature holds its bound, the model's vocab_size, which both
readers check every batch against (`out_of_range`), so that a record with a token id
the model has no embedding for is an error naming the file and record (`TokenIdError`),
not NaN losses. A feature with a token axis (its last) holds the value it is padded with
past an example's tokens (`token_fill`): batching and padding ask the spec which features
those are (`token_fills`), never a feature's name. Importing this module needs no
TensorFlow.
"""

import dataclasses
import math
from typing import Callable, Dict, Optional, Tuple

import numpy as np

from bert_tf import constants
from bert_tf.utils import errors

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
    bound: every value must be below it (token ids: the model's vocab_size); None: any.
    token_fill: the value its token axis (its last) is padded with past an example's
      tokens, where it has one (encoder inputs: 0; per-token labels: IGNORE_LABEL);
      None: no token axis (batches never cut or pad it).
  """

  name: str
  key: str
  shape: Tuple[int, ...]
  dtype: str = INT64
  default: Optional[float] = None
  bound: Optional[int] = None
  token_fill: Optional[float] = None

  @property
  def size(self) -> int:
    """The number of values a record holds."""
    return math.prod(self.shape)

  @property
  def batch_dtype(self) -> str:
    """The dtype of the feature in batches: int32 or float32."""
    return "int32" if self.dtype == INT64 else FLOAT32


RecordSpec = Tuple[RecordFeature, ...]


def token_fills(spec: RecordSpec) -> Dict[str, float]:
  """{batch key: token_fill} of the features of `spec` with a token axis: what batches
  are cut to their longest example and padded to a length bucket along."""
  return {f.key: f.token_fill for f in spec if f.token_fill is not None}


class TokenIdError(errors.UserError, ValueError):
  """A record holds a token id at or beyond the model's vocab_size; the message names
  the file and the record's byte offset, the feature and the id."""


def out_of_range(feature: RecordFeature, batch: np.ndarray,
                 where: Callable[[int], str]) -> Optional[TokenIdError]:
  """The error of the first row of `batch` (the feature's values [B, ...]) that holds a
  value at or beyond feature.bound, naming the row's record by `where(row)` ("FILE at
  byte offset N"); None when every value is below it (one max over the batch)."""
  if feature.bound is None or not batch.size or batch.max() < feature.bound:
    return None
  rows = np.reshape(batch, [len(batch), -1])
  row = int(np.flatnonzero(rows.max(axis=1) >= feature.bound)[0])
  value = int(rows[row][rows[row] >= feature.bound][0])
  return TokenIdError(f"{where(row)}: feature '{feature.name}' holds token id {value}, "
                      f"not below the model's vocab_size {feature.bound}")


def encoder_inputs(shape: Tuple[int, ...], vocab_size: int = 0) -> RecordSpec:
  """input_ids (below vocab_size where it is given; 0: any), input_mask and segment_ids of
  `shape` per example, read as the models' input_word_ids, input_mask and
  input_type_ids, each with a token axis padded with 0."""
  return (RecordFeature(constants.TFRECORD_INPUT_IDS, constants.INPUT_WORD_IDS, shape,
                        bound=vocab_size or None, token_fill=0),
          RecordFeature(constants.TFRECORD_INPUT_MASK, constants.INPUT_MASK, shape,
                        token_fill=0),
          RecordFeature(constants.TFRECORD_SEGMENT_IDS, constants.INPUT_TYPE_IDS, shape,
                        token_fill=0))


def pretraining_spec(seq_length: int, max_predictions_per_seq: int, vocab_size: int = 0
                     ) -> RecordSpec:
  """The original release's pretraining records (tools/create_pretraining_data.py),
  input_ids and masked_lm_ids below vocab_size where it is given.

  Batches: input_word_ids, input_mask, input_type_ids int32 [B, S]; masked_lm_positions,
  masked_lm_ids int32 [B, P]; masked_lm_weights float32 [B, P]; next_sentence_labels
  int32 [B].
  """
  names = constants.TFRECORD_TO_MODEL_INPUT
  predictions = (max_predictions_per_seq,)
  return encoder_inputs((seq_length,), vocab_size) + (
      RecordFeature(constants.TFRECORD_MASKED_LM_POSITIONS,
                    names[constants.TFRECORD_MASKED_LM_POSITIONS], predictions),
      RecordFeature(constants.TFRECORD_MASKED_LM_IDS,
                    names[constants.TFRECORD_MASKED_LM_IDS], predictions,
                    bound=vocab_size or None),
      RecordFeature(constants.TFRECORD_MASKED_LM_WEIGHTS,
                    names[constants.TFRECORD_MASKED_LM_WEIGHTS], predictions, FLOAT32),
      RecordFeature(constants.TFRECORD_NEXT_SENTENCE_LABELS,
                    names[constants.TFRECORD_NEXT_SENTENCE_LABELS], ()),
  )
