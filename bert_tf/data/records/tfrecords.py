"""TFRecord files of features: writing them atomically, reading them back in tf.data.

Every record is a `tf.train.Example` of flat int64 or float features. The generic
pieces (`serialize_example`, `write_records`, `ordered_record_dataset`) serve SQuAD's records
and the fine-tuning tasks' alike; `ordered_array_dataset` reads in-memory rows (raw task
files featurized once) in the same order; `write_finetuning_tfrecord` and
`read_finetuning_tfrecords` hold the fine-tuning tasks' layout: the original BERT
fine-tuning feature names (`input_ids`, `input_mask`, `segment_ids`, `label_ids`)
padded to seq_length, plus `example_index`, and a JSON metadata file beside each.
"""

import atexit
import functools
import json
import os
import threading
import time
from typing import Callable, Dict, Iterable, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from bert_tf.data.records import record_files
from bert_tf.data.records import record_order
from bert_tf.data.records import record_specs
from bert_tf.data.pipelines.batching import trim_to_longest
from bert_tf.utils import files
from bert_tf.utils import progress as progress_lib


def parse_records(serialized: tf.Tensor, spec: record_specs.RecordSpec
                  ) -> Dict[str, tf.Tensor]:
  """Parses serialized Examples by a record spec (bert_tf.data.records.record_specs).

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


# Set when the interpreter begins to exit: tf.data's threads must not enter Python once
# it finalizes (a thread taking the GIL then never returns, and the exit waits on it),
# so the Python stages below fail fast from then on and the pipelines stop calling them.
_EXITING = threading.Event()


@atexit.register
def _stop_python_stages():
  _EXITING.set()
  time.sleep(0.05)  # Lets calls under way return, the GIL released.


def _python_stage(fn):
  """fn for a tf.numpy_function of a tf.data pipeline, failing once the interpreter
  exits."""
  def stage(*args):
    if _EXITING.is_set():
      raise RuntimeError("the interpreter is exiting")
    return fn(*args)
  return stage


def _record_source(paths: Sequence[str], compression_type: str) -> record_files.RecordSource:
  """The files' RecordSource, indexed once per process while they stay unchanged: the
  TensorFlow engine builds the same input more than once (its element spec, the
  training iterator, a resumed one)."""
  stats = [os.stat(files.local_path(path)) if files.is_local(path) else None
           for path in paths]
  stamps = tuple((stat.st_mtime_ns, stat.st_size) if stat else None for stat in stats)
  return _indexed_source(tuple(paths), compression_type, stamps)


@functools.lru_cache(maxsize=4)
def _indexed_source(paths, compression_type, stamps) -> record_files.RecordSource:
  del stamps  # Part of the cache key only.
  return record_files.RecordSource(paths, compression_type)


def _ordered_elements(row_counts: Sequence[int], data_config, seed: int,
                      input_context: Optional[tf.distribute.InputContext], start: int,
                      row_groups: Optional[np.ndarray] = None):
  """The elements of a pipeline reading rows in the order both engines read them.

  Returns:
    (a tf.data.Dataset of int64 element numbers from `start`, place: element ->
    (global batch number, its rows int64 [b], their places in the global batch int64
    [b]), b where every batch holds b rows (repeated or drop_remainder; else None), so
    that the batches' shapes say it, as a step compiled once per shape needs). Element m is the batch of replica (pipeline * R / P + m % (R / P)) of step
    m // (R / P), R = num_replicas_in_sync, P = num_input_pipelines. `row_groups` as
    record_order.RecordOrder takes them.
  """
  order = record_order.RecordOrder(row_counts, data_config.global_batch_size, seed=seed,
                                   row_groups=row_groups,
                                   **record_order.settings(data_config))
  parts, pipelines, pipeline = 1, 1, 0
  if input_context is not None:
    parts = input_context.num_replicas_in_sync
    pipelines = input_context.num_input_pipelines
    pipeline = input_context.input_pipeline_id
  per_pipeline = parts // pipelines
  share = order.part_size(parts)

  def place(element):
    batch, replica = divmod(int(element), per_pipeline)
    offsets = order.offsets(batch, pipeline * per_pipeline + replica, parts)
    return batch, order.rows_at(batch * order.global_batch_size + offsets), offsets

  def element_holds_rows(element):
    batch, replica = element // per_pipeline, element % per_pipeline
    return (batch * order.global_batch_size + pipeline * per_pipeline + replica <
            order.num_rows)

  elements = np.iinfo(np.int64).max if order.repeat else order.num_batches * per_pipeline
  dataset = tf.data.Dataset.range(start, elements)
  if not order.repeat:
    dataset = dataset.filter(element_holds_rows)
  rows = share if order.repeat or data_config.drop_remainder else None
  return dataset, place, rows


def _deterministic(dataset: tf.data.Dataset) -> tf.data.Dataset:
  options = tf.data.Options()
  options.deterministic = True
  return dataset.with_options(options)


def ordered_record_dataset(paths: Sequence[str], spec: record_specs.RecordSpec,
                           data_config, seed: int = 0,
                           input_context: Optional[tf.distribute.InputContext] = None,
                           start: int = 0, draw=None) -> tf.data.Dataset:
  """Batches of the records of TFRecord files in the order both engines read them
  (bert_tf.data.records.record_order; the host input, bert_tf.data.pipelines.host_pipeline, reads the
  same), decoded by `spec`.

  The records are read by number through bert_tf.data.records.record_files (their checksums
  checked: a corrupt one fails as a CorruptRecordError naming the file and byte
  offset, inside a tf.errors.InvalidArgumentError) and parsed in tf.data; a token id
  at or beyond its feature's bound fails as a TokenIdError naming the record
  (`token_id_error`).

  Args:
    paths: the files; records are numbered over them in order.
    spec: the records' features.
    data_config: bert_tf.configs.DataConfig: global_batch_size, is_training (shuffle
      windows of shuffle_buffer_size records by `seed`, repeat), drop_remainder,
      compression_type.
    seed: of the training shuffle.
    input_context: this pipeline among num_input_pipelines, each for its replicas (see
      `_ordered_elements`).
    start: the pipeline's elements to skip (resuming), without reading them.
    draw: (batch of NumPy arrays, global batch number, its rows' places in the global
      batch) -> the batch with values drawn from its place in the order
      (host_pipeline.Draw: dynamic masking), run in a tf.numpy_function on each parsed
      batch; the host input applies the same.

  Returns:
    A dataset of {feature key: [b, *shape]}, b = global_batch_size / R, static where
    every batch is full (is_training, or drop_remainder).
  """
  source = _record_source(paths, data_config.compression_type)
  dataset, place, rows = _ordered_elements(source.row_counts(), data_config, seed,
                                           input_context, start)

  def read(element):
    return np.array([source[row].data for row in place(element)[1]], dtype=object)

  keys = [feature.key for feature in spec]

  def redraw(element, *values):
    batch, _, offsets = place(element)
    drawn = draw(dict(zip(keys, values)), batch, offsets)
    return [np.asarray(drawn[key], value.dtype) for key, value in zip(keys, values)]

  def parse(element):
    records = tf.numpy_function(_python_stage(read), [element], tf.string, stateful=False)
    batch = _checked(parse_records(tf.ensure_shape(records, [rows]), spec), spec, element,
                     lambda element, row: source[place(element)[1][row]].where())
    if draw is None:
      return batch
    values = tf.numpy_function(_python_stage(redraw), [element, *(batch[key] for key in keys)],
                               [batch[key].dtype for key in keys], stateful=False)
    return {key: tf.ensure_shape(value, batch[key].shape)
            for key, value in zip(keys, values)}

  return _deterministic(dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE,
                                    deterministic=True))


def _checked(batch: Dict[str, tf.Tensor], spec: record_specs.RecordSpec,
             element: tf.Tensor, where: Callable[[int, int], str]) -> Dict[str, tf.Tensor]:
  """`batch` once each feature of `spec` with a bound is below it (one max per batch);
  else the batch fails with record_specs.out_of_range's TokenIdError naming the first
  record at fault by `where(element, row)`, inside a tf.errors.InvalidArgumentError
  (`token_id_error` gives it back)."""
  bounded = [feature for feature in spec if feature.bound is not None]
  if not bounded:
    return batch

  def fail(element, *values):
    for feature, value in zip(bounded, values):
      error = record_specs.out_of_range(feature, value, lambda row: where(element, row))
      if error is not None:
        raise error
    return np.bool_(True)

  values = [batch[feature.key] for feature in bounded]
  beyond = tf.reduce_any(tf.stack([tf.reduce_max(value) >= feature.bound
                                   for feature, value in zip(bounded, values)]))
  checked = tf.cond(
      beyond, lambda: tf.numpy_function(_python_stage(fail), [element, *values], tf.bool,
                                        stateful=False),
      lambda: tf.constant(True))
  with tf.control_dependencies([checked]):
    first = bounded[0].key
    return dict(batch, **{first: tf.identity(batch[first])})


def token_id_error(error: Exception) -> Optional[record_specs.TokenIdError]:
  """The TokenIdError that a batch of `ordered_record_dataset` failed with, from the
  tf.errors.InvalidArgumentError it arrives in; None for any other error."""
  name = record_specs.TokenIdError.__name__
  if not isinstance(error, tf.errors.InvalidArgumentError) or f"{name}: " not in (
      error.message or ""):
    return None
  return record_specs.TokenIdError(error.message.split(f"{name}: ", 1)[1].split("\n", 1)[0])


def ordered_array_dataset(arrays: Mapping[str, np.ndarray], data_config, seed: int = 0,
                          input_context: Optional[tf.distribute.InputContext] = None,
                          start: int = 0, finish=None,
                          row_groups: Optional[np.ndarray] = None) -> tf.data.Dataset:
  """Batches of in-memory rows (raw task files featurized once, numbered in file order)
  in the order both engines read them, as `ordered_record_dataset` reads records; the
  host input (host_pipeline.array_batches) reads the same.

  Args:
    arrays: {feature key: [N, ...]}; row i of each is example i.
    data_config, seed, input_context, start: as `ordered_record_dataset` takes them.
    finish: applied to each NumPy batch in the tf.numpy_function (packing); it may
      change the batch's keys and leading dims, and gives `finish.output_spec`
      ({key: (dtype, rank)}) the shapes of what it returns.
    row_groups: int [N], each row's group (record_order.RecordOrder's grouping).

  Returns:
    A dataset of {feature key: [b, ...]}, b = global_batch_size / R (rows of `finish`).
  """
  arrays = {key: np.asarray(value) for key, value in arrays.items()}
  dataset, place, rows = _ordered_elements([len(next(iter(arrays.values())))],
                                           data_config, seed, input_context, start,
                                           row_groups)
  if finish is None:
    spec = {key: (value.dtype, value.ndim) for key, value in arrays.items()}
  else:
    spec = finish.output_spec
  keys = sorted(spec)

  def read(element):
    rows = place(element)[1]
    batch = {key: value[rows] for key, value in arrays.items()}
    batch = finish(batch) if finish is not None else batch
    return [np.asarray(batch[key], spec[key][0]) for key in keys]

  def gather(element):
    values = tf.numpy_function(_python_stage(read), [element],
                               [tf.as_dtype(spec[key][0]) for key in keys], stateful=False)
    out = {}
    for key, value in zip(keys, values):
      shape = [None] * spec[key][1]
      if finish is None:
        shape = [rows, *arrays[key].shape[1:]]
      out[key] = tf.ensure_shape(value, shape)
    return out

  return _deterministic(dataset.map(gather, num_parallel_calls=tf.data.AUTOTUNE,
                                    deterministic=True))


# --------------------------------------------------------------------------------------
# The fine-tuning tasks' records.


def write_finetuning_tfrecord(ds: tf.data.Dataset, path: str, spec: record_specs.RecordSpec,
                              pad: Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]],
                              metadata: Dict[str, object],
                              progress: Optional[progress_lib.Progress] = None) -> int:
  """Writes a featurized (unbatched) dataset as a TFRecord file and its metadata.

  The file is written under a temporary name and renamed when complete; `path +
  ".json"` then receives `metadata` plus the example count (num_examples).

  Args:
    ds: the output of a record kind's featurizer (FeatureKind.featurize).
    path: the output TFRecord path.
    spec: the record kind's features (their batch keys to their record names).
    pad: pads one example's features to the spec's shapes (the kind's example_padder).
    metadata: facts to record (task, label names, source files, kind, seq_length, ...).
    progress: counts the examples written.

  Returns:
    The number of examples written.
  """
  names = {f.key: f.name for f in spec}
  records = (serialize_example({names[key]: value for key, value in pad(features).items()})
             for features in ds.as_numpy_iterator())
  count = write_records(path, records, progress)
  with files.atomic_open(path + ".json") as f:
    f.write(json.dumps(dict(metadata, num_examples=count), indent=2))
  return count


def read_finetuning_tfrecords(data_config, spec: record_specs.RecordSpec, seed: int = 0,
                              input_context: Optional[tf.distribute.InputContext] = None,
                              start: int = 0) -> tf.data.Dataset:
  """Reads fine-tuning TFRecords into batches trimmed to their longest example, in the
  order of `ordered_record_dataset`.

  Args:
    data_config: bert_tf.configs.DataConfig (input_path, seq_length the records were
      padded to, and the order's settings).
    spec: the features of the records (a record kind's spec).
    seed: of the training shuffle.
    input_context, start: as `ordered_record_dataset` takes them.

  Returns:
    Batches (global_batch_size / num_replicas_in_sync examples) as
    `bert_tf.data.pipelines.batching` describes them.
  """
  paths = files.expand_patterns(data_config.input_path,
                                field=f"{data_config.section_name()}.input_path")
  ds = ordered_record_dataset(paths, spec, data_config, seed, input_context, start)
  fills = record_specs.token_fills(spec)
  return ds.map(lambda batch: trim_to_longest(batch, fills)).prefetch(tf.data.AUTOTUNE)


def read_finetuning_arrays(arrays: Mapping[str, np.ndarray], data_config,
                           fills: Mapping[str, object], seed: int = 0,
                           input_context: Optional[tf.distribute.InputContext] = None,
                           start: int = 0, finish=None,
                           row_groups: Optional[np.ndarray] = None) -> tf.data.Dataset:
  """Batches of featurized raw-file examples (arrays padded to seq_length) in the order
  of `ordered_array_dataset`, cut to their longest example along the features of
  `fills` (the record kind's token_fills) as `read_finetuning_tfrecords` gives them, or
  packed by `finish` (bert_tf.data.pipelines.example_packing.Packer)."""
  ds = ordered_array_dataset(arrays, data_config, seed, input_context, start, finish,
                             row_groups)
  if finish is None:
    ds = ds.map(lambda batch: trim_to_longest(batch, fills))
  return ds.prefetch(tf.data.AUTOTUNE)
