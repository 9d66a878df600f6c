"""tf.data input pipeline over pretraining TFRecords (the original release's features).

`build_pretraining_dataset` yields per-replica batches keyed by the model's input names.
`inspect_pretraining_files` tells the trainer, before it builds anything, the sequence
length, predictions per sequence and largest token id of the data, so that a config that
does not fit the files is an error up front.

Everything in the pipeline is a TensorFlow op (no tf.py_function), so the iterator can be
checkpointed and the pipeline runs on TPU hosts.
"""

import dataclasses
import json
from typing import Dict, List, Optional

import tensorflow as tf

from bert_tf import constants
from bert_tf.data import masking
from bert_tf.data import pretraining_format
from bert_tf.utils import errors
from bert_tf.utils import files

_INT_FEATURES = (constants.TFRECORD_INPUT_IDS, constants.TFRECORD_INPUT_MASK,
                 constants.TFRECORD_SEGMENT_IDS)
_PREDICTION_FEATURES = (constants.TFRECORD_MASKED_LM_POSITIONS,
                        constants.TFRECORD_MASKED_LM_IDS)


class PretrainingInputError(errors.UserError, ValueError):
  """The pretraining input files are missing, empty, corrupt or do not fit the config."""


def list_record_files(input_path: str) -> List[str]:
  """Expands comma-separated globs (see `bert_tf.utils.files.expand_patterns`)."""
  try:
    return files.expand_patterns(input_path, field="input_path")
  except FileNotFoundError as e:
    raise PretrainingInputError(str(e)) from None


def feature_spec(seq_length: int, max_predictions_per_seq: int) -> Dict:
  """tf.io.parse_example spec of the original release's features."""
  spec = {name: tf.io.FixedLenFeature([seq_length], tf.int64) for name in _INT_FEATURES}
  for name in _PREDICTION_FEATURES:
    spec[name] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
  spec[constants.TFRECORD_MASKED_LM_WEIGHTS] = tf.io.FixedLenFeature(
      [max_predictions_per_seq], tf.float32)
  spec[constants.TFRECORD_NEXT_SENTENCE_LABELS] = tf.io.FixedLenFeature([1], tf.int64)
  return spec


def parse_batch(serialized, seq_length: int, max_predictions_per_seq: int):
  """Parses serialized Examples [B] into the model's inputs.

  Returns:
    dict: input_word_ids, input_mask, input_type_ids int32 [B, S]; masked_lm_positions,
    masked_lm_ids int32 [B, P]; masked_lm_weights float32 [B, P]; next_sentence_labels
    int32 [B].
  """
  parsed = tf.io.parse_example(serialized, feature_spec(seq_length, max_predictions_per_seq))
  out = {}
  for name, value in parsed.items():
    if value.dtype == tf.int64:
      value = tf.cast(value, tf.int32)
    if name == constants.TFRECORD_NEXT_SENTENCE_LABELS:
      value = tf.squeeze(value, axis=-1)
    out[constants.TFRECORD_TO_MODEL_INPUT[name]] = value
  return out


def build_pretraining_dataset(data_config, input_context: Optional[tf.distribute.InputContext]
                              = None, vocab_file: str = "") -> tf.data.Dataset:
  """The pretraining input pipeline.

  Args:
    data_config: bert_tf.configs.DataConfig. Uses input_path (comma-separated globs),
      compression_type, seq_length, max_predictions_per_seq, global_batch_size,
      is_training (shuffle and repeat), drop_remainder, shuffle_buffer_size,
      cycle_length, deterministic, and for dynamic masking dynamic_masking,
      masked_lm_prob and whole_word_masking.
    input_context: from `strategy.distribute_datasets_from_function`; files are sharded
      over its input pipelines (records, when there are fewer files than pipelines) and
      the batch is the per-replica size.
    vocab_file: the WordPiece vocab dynamic masking draws replacement tokens from (the
      experiment's tokenizer.vocab_file).

  Returns:
    tf.data.Dataset of dicts: input_word_ids, input_mask, input_type_ids int32 [b, S];
    masked_lm_positions, masked_lm_ids int32 [b, P]; masked_lm_weights float32 [b, P];
    next_sentence_labels int32 [b], where b is the per-replica batch size.
  """
  files = list_record_files(data_config.input_path)
  seq_length = data_config.seq_length
  max_predictions = data_config.max_predictions_per_seq
  deterministic = data_config.deterministic
  vocab = None
  if data_config.dynamic_masking:
    vocab = masking.read_masking_vocab(vocab_file)

  num_pipelines, pipeline_id = 1, 0
  if input_context is not None:
    num_pipelines = input_context.num_input_pipelines
    pipeline_id = input_context.input_pipeline_id
  shard_files = num_pipelines > 1 and len(files) >= num_pipelines

  dataset = tf.data.Dataset.from_tensor_slices(files)
  if shard_files:
    dataset = dataset.shard(num_pipelines, pipeline_id)
  if data_config.is_training:
    dataset = dataset.shuffle(len(files)).repeat()
  compression = data_config.compression_type
  dataset = dataset.interleave(
      lambda f: tf.data.TFRecordDataset(f, compression_type=compression),
      cycle_length=max(1, min(data_config.cycle_length, len(files))),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
  if num_pipelines > 1 and not shard_files:
    dataset = dataset.shard(num_pipelines, pipeline_id)
  if data_config.is_training:
    dataset = dataset.shuffle(data_config.shuffle_buffer_size)

  batch_size = data_config.global_batch_size
  if input_context is not None:
    batch_size = input_context.get_per_replica_batch_size(batch_size)
  dataset = dataset.batch(batch_size, drop_remainder=data_config.drop_remainder)
  dataset = dataset.map(lambda s: parse_batch(s, seq_length, max_predictions),
                        num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
  if vocab is not None:
    remask = masking.dynamic_masking_fn(vocab, data_config.masked_lm_prob, max_predictions,
                                        data_config.whole_word_masking)
    # A checkpointable random stream gives every batch its own seed, so each epoch (and
    # each pass of an evaluation) draws new masks.
    seeds = tf.data.Dataset.random(rerandomize_each_iteration=True)
    dataset = tf.data.Dataset.zip((seeds, dataset)).map(
        remask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
  options = tf.data.Options()
  options.deterministic = deterministic
  dataset = dataset.with_options(options)
  return dataset.prefetch(tf.data.AUTOTUNE)


# ---------------------------------------------------------------------------------------
# Checks before training.


@dataclasses.dataclass
class PretrainingFilesInfo:
  """What the data fixes about the model and config.

  Attributes:
    files: the matched files.
    seq_length: length of input_ids in the first record.
    max_predictions_per_seq: length of masked_lm_positions in the first record.
    max_token_id: largest token id: from the JSON summary when there is one, otherwise the
      largest id in the first record (a lower bound).
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
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path, "r") as f:
    try:
      return json.load(f)
    except json.JSONDecodeError as e:
      raise PretrainingInputError(f"Cannot parse the summary {path}: {e}") from None


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
  """
  files = list_record_files(input_path)
  first = files[0]
  try:
    records = list(tf.data.TFRecordDataset(first, compression_type=compression_type).take(1))
  except tf.errors.OpError as e:
    raise PretrainingInputError(f"Cannot read {first}: {e.message}") from None
  if not records:
    raise PretrainingInputError(f"Pretraining file holds no record: {first}")
  example = tf.train.Example.FromString(records[0].numpy())
  feature = example.features.feature
  missing = [n for n in constants.TFRECORD_TO_MODEL_INPUT if n not in feature]
  if missing:
    raise PretrainingInputError(f"{first}: the first record lacks feature(s) "
                                f"{', '.join(missing)}")
  input_ids = list(feature[constants.TFRECORD_INPUT_IDS].int64_list.value)
  masked_ids = list(feature[constants.TFRECORD_MASKED_LM_IDS].int64_list.value)
  max_id = max(input_ids + masked_ids)
  summary = _find_summary(first)
  vocab_size = None
  if summary is not None:
    vocab_size = summary.get("vocab_size")
    max_id = max(max_id, summary.get("max_token_id", max_id))
  return PretrainingFilesInfo(
      files=files, seq_length=len(input_ids),
      max_predictions_per_seq=len(feature[constants.TFRECORD_MASKED_LM_POSITIONS]
                                  .int64_list.value),
      max_token_id=max_id, vocab_size=vocab_size, summary=summary)
