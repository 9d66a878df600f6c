"""TFRecord files of features: writing them atomically, reading them back in tf.data.

Every record is a `tf.train.Example` of flat int64 or float features. The generic
pieces (`serialize_example`, `write_records`, `record_dataset`) serve SQuAD's records
and the fine-tuning tasks' alike; `write_finetuning_tfrecord` and
`read_finetuning_tfrecords` hold the fine-tuning tasks' layout: the original BERT
fine-tuning feature names (`input_ids`, `input_mask`, `segment_ids`, `label_ids`)
padded to seq_length, plus `example_index`, and a JSON metadata file beside each.
"""

import json
import re
from typing import Dict, Iterable, Mapping, Optional

import numpy as np
import tensorflow as tf

from bert_tf.data import padding
from bert_tf.data import record_files
from bert_tf.data import record_specs
from bert_tf.data.batching import trim_to_longest
from bert_tf.utils import files
from bert_tf.utils import progress as progress_lib


def parse_records(serialized: tf.Tensor, spec: record_specs.RecordSpec
                  ) -> Dict[str, tf.Tensor]:
  """Parses serialized Examples by a record spec (bert_tf.data.record_specs).

  Args:
    serialized: scalar or [B] tf.string records.
    spec: the features to read.

  Returns:
    {feature key: int32 (int64 features) or float32 tensor [*shape] or [B, *shape]}.
  """
  parse_spec = {}
  for feature in spec:
    dtype = tf.int64 if feature.dtype == record_specs.INT64 else tf.float32
    parse_spec[feature.name] = tf.io.FixedLenFeature(list(feature.shape), dtype,
                                                     default_value=feature.default)
  if serialized.shape.rank == 0:
    parsed = tf.io.parse_single_example(serialized, parse_spec)
  else:
    parsed = tf.io.parse_example(serialized, parse_spec)
  return {feature.key: tf.cast(parsed[feature.name], feature.batch_dtype)
          for feature in spec}


def serialize_example(features: Mapping[str, np.ndarray]) -> bytes:
  """A serialized tf.train.Example: float arrays as FloatList, the rest as Int64List.

  Args:
    features: name -> array (any shape; flattened) or scalar.
  """
  feature = {}
  for name, value in features.items():
    value = np.asarray(value).reshape([-1])
    if value.dtype.kind == "f":
      feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=value.tolist()))
    else:
      feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=value.tolist()))
  return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_records(path: str, records: Iterable[bytes],
                  progress: Optional[progress_lib.Progress] = None) -> int:
  """Writes serialized records to `path` through a temporary name; returns the count.

  The file appears under its final name only once every record is written; an
  exception leaves no file (and an older one at `path` as it was).
  """
  count = 0
  with files.atomic_path(path) as tmp:
    with tf.io.TFRecordWriter(tmp) as writer:
      for record in records:
        writer.write(record)
        count += 1
        if progress is not None:
          progress.update(1)
  return count


def record_dataset(input_path: str, field: str = "input_path", is_training: bool = False,
                   input_context: Optional[tf.distribute.InputContext] = None
                   ) -> tf.data.Dataset:
  """Serialized records of the files that comma-separated globs name.

  Args:
    input_path: comma-separated globs (see `bert_tf.utils.files.expand_patterns`).
    field: the setting they came from, for error messages.
    is_training: lets the files interleave non-deterministically.
    input_context: shards the files (or, with fewer files than pipelines, the records)
      across input pipelines.

  Returns:
    A dataset of scalar tf.string records.
  """
  paths = files.expand_patterns(input_path, field=field)
  ds = tf.data.Dataset.from_tensor_slices(paths)
  pipelines = input_context.num_input_pipelines if input_context is not None else 1
  if pipelines > 1 and len(paths) < pipelines:
    return ds.interleave(tf.data.TFRecordDataset).shard(
        pipelines, input_context.input_pipeline_id)
  if pipelines > 1:
    ds = ds.shard(pipelines, input_context.input_pipeline_id)
  return ds.interleave(tf.data.TFRecordDataset, num_parallel_calls=tf.data.AUTOTUNE,
                       deterministic=not is_training)


# --------------------------------------------------------------------------------------
# The fine-tuning tasks' records.


def _padded_record(features: Mapping[str, np.ndarray], kind: str, seq_length: int,
                   regression: bool) -> bytes:
  """One featurized example, padded to seq_length, as a serialized record."""
  names = {f.key: f.name for f in record_specs.finetuning_spec(kind, seq_length, regression)}
  return serialize_example({names[key]: value for key, value in padding.pad_example(
      features, kind, seq_length, regression).items()})


def write_finetuning_tfrecord(ds: tf.data.Dataset, path: str, kind: str, seq_length: int,
                              metadata: Dict[str, object], regression: bool = False,
                              progress: Optional[progress_lib.Progress] = None) -> int:
  """Writes a featurized (unbatched) dataset as a TFRecord file and its metadata.

  The file is written under a temporary name and renamed when complete; `path +
  ".json"` then receives `metadata` plus kind, seq_length and the example count.

  Args:
    ds: the output of a `bert_tf.data.featurizers` featurizer.
    path: the output TFRecord path.
    kind: one of `bert_tf.data.record_specs.KINDS`.
    seq_length: every sequence is padded to this length.
    metadata: task facts to record (label names, source files, ...).
    regression: labels are float scores.
    progress: counts the examples written.

  Returns:
    The number of examples written.
  """
  records = (_padded_record(features, kind, seq_length, regression)
             for features in ds.as_numpy_iterator())
  count = write_records(path, records, progress)
  meta = dict(metadata, kind=kind, seq_length=seq_length, num_examples=count,
              regression=regression)
  with files.atomic_open(path + ".json") as f:
    f.write(json.dumps(meta, indent=2))
  return count


def read_finetuning_tfrecords(input_path: str, kind: str, seq_length: int, batch_size: int,
                              is_training: bool, drop_remainder: bool = True,
                              regression: bool = False, num_choices: int = 1,
                              shuffle_buffer_size: int = 10000, seed: Optional[int] = None,
                              input_context: Optional[tf.distribute.InputContext] = None
                              ) -> tf.data.Dataset:
  """Reads fine-tuning TFRecords into batches trimmed to their longest example.

  Args:
    input_path: comma-separated file globs.
    kind: one of `bert_tf.data.record_specs.KINDS`.
    seq_length: the length the records were padded to.
    batch_size: examples per batch (per replica).
    is_training: shuffle and repeat.
    regression: label_ids are floats.
    num_choices: choices per example (multiple_choice).
    input_context: shards files (or records) across input pipelines.

  Returns:
    Batches as `bert_tf.data.batching` describes them.
  """
  spec = record_specs.finetuning_spec(kind, seq_length, regression, num_choices)

  def decode(record):
    return parse_records(record, spec)

  section = "train_data" if is_training else "eval_data"
  ds = record_dataset(input_path, f"{section}.input_path", is_training, input_context)
  if is_training:
    ds = ds.shuffle(shuffle_buffer_size, seed=seed).repeat()
  ds = ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
  ds = ds.batch(batch_size, drop_remainder=drop_remainder)
  return ds.map(trim_to_longest).prefetch(tf.data.AUTOTUNE)
