"""The pretraining TFRecords named by a data config, and what they fix about the model.

`inspect_pretraining_files` tells the trainer, before it builds anything, the sequence
length, predictions per sequence and largest token id of the data, so that a config that
does not fit the files is an error up front. It reads the first record without
TensorFlow (bert_tf.data.records.record_files), so both engines' inputs check the same way.
"""

import dataclasses
import json
from typing import List, Optional

from google.protobuf import message as message_lib

from bert_tf import constants
from bert_tf.data.records import example_decoding
from bert_tf.data.records import pretraining_format
from bert_tf.data.records import record_files
from bert_tf.utils import errors
from bert_tf.utils import files


class PretrainingInputError(errors.UserError, ValueError):
  """The pretraining input files are missing, empty, corrupt or do not fit the config."""


def list_record_files(input_path: str) -> List[str]:
  """Expands comma-separated globs (see `bert_tf.utils.files.expand_patterns`)."""
  return files.expand_patterns(input_path, field="input_path", error=PretrainingInputError)


@dataclasses.dataclass
class PretrainingFilesInfo:
  """What the data fixes about the model and config.

  Attributes:
    files: the matched files.
    seq_length: length of input_ids in the first record.
    max_predictions_per_seq: length of masked_lm_positions in the first record.
    max_token_id: largest token id: from the JSON summary when there is one, otherwise the
      largest id in the first record (a lower bound: both engines' inputs check every
      record's ids against the model's vocab_size as they read it,
      record_specs.out_of_range).
    vocab_size: the summary's vocab size, or None without a summary.
    summary: the JSON summary written by tools/create_pretraining_data.py, or None.
  """

  files: List[str]
  seq_length: int
  max_predictions_per_seq: int
  max_token_id: int
  vocab_size: Optional[int]
  summary: Optional[dict]

  def check_config(self, data_config, vocab_size: int):
    """Raises PretrainingInputError when the data config or the model's vocab does not fit.

    Args:
      data_config: DataConfig whose seq_length and max_predictions_per_seq must match.
      vocab_size: the model's vocab size; every token id must be below it.
    """
    problems = []
    if data_config.seq_length != self.seq_length:
      problems.append(f"seq_length is {data_config.seq_length} but the files hold "
                      f"{self.seq_length}")
    if data_config.max_predictions_per_seq != self.max_predictions_per_seq:
      problems.append(f"max_predictions_per_seq is {data_config.max_predictions_per_seq} "
                      f"but the files hold {self.max_predictions_per_seq}")
    largest = max(self.max_token_id, (self.vocab_size or 0) - 1)
    if largest >= vocab_size:
      problems.append(f"the model's vocab_size {vocab_size} is too small for token id "
                      f"{largest}")
    if problems:
      raise PretrainingInputError(f"{self.files[0]}: " + "; ".join(problems))


def _find_summary(first_file: str) -> Optional[dict]:
  path = pretraining_format.summary_path_for_record_file(first_file)
  if not files.exists(path):
    return None
  with files.open_input(path) as f:
    try:
      return json.loads(f.read().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
      raise PretrainingInputError(f"Cannot parse the summary {path}: {e}") from None


def _first_record_lengths(path: str, compression_type: str):
  """(the first record's feature value counts by name, its largest token id)."""
  record = record_files.read_first_record(path, compression_type)
  if record is None:
    raise PretrainingInputError(f"Pretraining file holds no record: {path}")
  try:
    feature = example_decoding.example_class().FromString(record).features.feature
  except message_lib.DecodeError as e:
    raise PretrainingInputError(f"{path}: the first record is not a tf.train.Example "
                                f"({e})") from None
  missing = [n for n in constants.TFRECORD_TO_MODEL_INPUT if n not in feature]
  if missing:
    raise PretrainingInputError(f"{path}: the first record lacks feature(s) "
                                f"{', '.join(missing)}")
  counts = {}
  for name in constants.TFRECORD_TO_MODEL_INPUT:
    value = feature[name]
    counts[name] = len(getattr(value, value.WhichOneof("kind") or "int64_list").value)
  ids = (list(feature[constants.TFRECORD_INPUT_IDS].int64_list.value)
         + list(feature[constants.TFRECORD_MASKED_LM_IDS].int64_list.value))
  return counts, max(ids)


def inspect_pretraining_files(input_path: str, compression_type: str = ""
                              ) -> PretrainingFilesInfo:
  """Reads the first record (and the JSON summary beside it, if any).

  Args:
    input_path: comma-separated globs, as data_config.input_path.
    compression_type: "", "GZIP" or "ZLIB".

  Returns:
    PretrainingFilesInfo; use its check_config(data_config, vocab_size) before training.

  Raises:
    PretrainingInputError: no file, an empty first file, or a record that is not a
      pretraining example.
    CorruptRecordError: a first record whose checksums fail, naming the byte offset.
  """
  paths = list_record_files(input_path)
  counts, max_id = _first_record_lengths(paths[0], compression_type)
  summary = _find_summary(paths[0])
  vocab_size = None
  if summary is not None:
    vocab_size = summary.get("vocab_size")
    max_id = max(max_id, summary.get("max_token_id", max_id))
  return PretrainingFilesInfo(
      files=paths, seq_length=counts[constants.TFRECORD_INPUT_IDS],
      max_predictions_per_seq=counts[constants.TFRECORD_MASKED_LM_POSITIONS],
      max_token_id=max_id, vocab_size=vocab_size, summary=summary)

