"""The registry of record kinds, each with its data loaders keyed by input format, and
what every loader shares.

A record kind (`RecordKind`) is one object registered once (`register_kind`): the
features of its records, its synthetic batches and its loaders, one per format (as
Model Garden pairs a data config with its loader); kinds of featurized examples also
pad and featurize (bert_tf.data.pipelines.loaders.features.FeatureKind). A task declares
the kind of records it reads and what its loader needs of it (an `InputNeeds`);
`get_loader(needs, data_config)` picks the loader of the kind for the data section's
format, so the formats a task reads are those of its kind. Each loader gives one input
in two forms built from
the same feature spec and the same order (bert_tf.data.records.record_order): `dataset`,
per-replica tf.data batches (the TensorFlow engine, the exporter's measures), and
`host_batches`, NumPy batches with a checkpointable position read without TensorFlow
(the JAX engine). Importing this module needs no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import types
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, Tuple

from bert_tf import configs
from bert_tf.data.pipelines import host_pipeline
from bert_tf.data.records import record_files
from bert_tf.data.records import record_specs

if TYPE_CHECKING:
  import tensorflow as tf  # pylint: disable=g-bad-import-order

DUMMY = "dummy"
TFRECORD = "tfrecord"
# Formats read from files already featurized (or synthetic); the others are raw files.
PREPARED_FORMATS = (DUMMY, TFRECORD)

_KINDS: Dict[str, "RecordKind"] = {}


def tf_data() -> types.SimpleNamespace:
  """bert_tf's TensorFlow input modules, imported on first use so that the loaders and
  the tasks import, and the JAX engine runs, without TensorFlow: the tf.data pipelines
  (featurizers, pretraining_reader, squad_features, tfrecords) and tensorflow-text's
  tokenizer and vocab (`tokenizer`, `vocab`)."""
  from bert_tf.data.pipelines import featurizers, pretraining_reader, squad_features  # pylint: disable=g-import-not-at-top
  from bert_tf.data.records import tfrecords  # pylint: disable=g-import-not-at-top
  from bert_tf.text import tokenizer, vocab  # pylint: disable=g-import-not-at-top
  return types.SimpleNamespace(
      featurizers=featurizers, pretraining_reader=pretraining_reader,
      squad_features=squad_features, tfrecords=tfrecords, tokenizer=tokenizer, vocab=vocab)


def require_tensorflow_text(data_config: configs.DataConfig) -> None:
  """Raises ConfigError, naming the section, where raw task files cannot be featurized:
  tokenizing them needs tensorflow-text (and TensorFlow)."""
  try:
    import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    raise configs.ConfigError(
        f"{data_config.section_name()}.format '{data_config.format}': reading raw task "
        "files needs tensorflow-text: featurize them with tools/create_finetuning_data.py "
        "first and read format tfrecord") from None


@dataclasses.dataclass(frozen=True)
class InputNeeds:
  """What a task reads and what its loader needs of it.

  Attributes:
    task: the task's name (for messages).
    record_kind: the name of a registered RecordKind.
    seed: of the training shuffle and of synthetic data (runtime.seed).
    vocab_size: of the model (synthetic ids are drawn below it).
    vocab_file, lower_case: the tokenizer section (featurizing raw files; dynamic
      masking's replacement tokens; what the files' summary may fill in).
    regression: labels are float scores.
    label_names: class or tag names in id order (synthetic labels are drawn below
      their count, raw labels are looked up in them).
    options: the task section's settings that its kind's featurizer and the readers
      of its raw formats (bert_tf.data.task_files.readers) take, by name.
    cache: what the loaders keep between the inputs built for one task (raw files
      are read and featurized once; the trainer builds an input more than once).
  """

  task: str
  record_kind: str
  seed: int = 0
  vocab_size: int = 0
  vocab_file: str = ""
  lower_case: bool = True
  regression: bool = False
  label_names: Tuple[str, ...] = ()
  options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  cache: Dict[Any, Any] = dataclasses.field(default_factory=dict, compare=False)

  def cached(self, key, make: Callable[[], Any]):
    """`make()`, made once per `key` for this task."""
    if key not in self.cache:
      self.cache[key] = make()
    return self.cache[key]


class RecordKind:
  """One kind of records: the features of its records, its synthetic batches and its
  data loaders, registered once with `register_kind`.

  Subclasses set `name` and `formats` and define `spec` and `dummy_arrays`, which their
  loaders read through `DataLoader.kind`.

  Attributes:
    name: the kind's key in the registry (a task's record_kind).
    formats: {format: DataLoader subclass}, the formats records of this kind are read
      in and the loader of each.
  """

  name: str = ""
  formats: Mapping[str, type] = {}

  def spec(self, needs: InputNeeds, data_config: configs.DataConfig
           ) -> record_specs.RecordSpec:
    """The features of this kind's TFRecords for data_config's lengths."""
    raise NotImplementedError

  def dummy_arrays(self, needs: InputNeeds, data_config: configs.DataConfig
                   ) -> Dict[str, Any]:
    """Synthetic examples {feature: [N, ...]} with the structure of real batches."""
    raise NotImplementedError

  def token_fills(self, needs: InputNeeds, data_config: configs.DataConfig
                  ) -> Dict[str, Any]:
    """{feature: fill}: the features of this kind's batches with a token axis (their
    last), which batching cuts to a batch's longest example and pads to its length
    bucket, and the value each is padded with (its spec's token_fill)."""
    return record_specs.token_fills(self.spec(needs, data_config))


class DataLoader:
  """One input: the data section `data_config` of a task's `needs`, in two forms.

  Subclasses (the loaders of a RecordKind's formats) define `dataset` and `_host_batches`.
  """

  def __init__(self, needs: InputNeeds, data_config: configs.DataConfig):
    self.needs = needs
    self.data_config = data_config

  @property
  def kind(self) -> RecordKind:
    """The record kind this loader reads (needs.record_kind)."""
    return _KINDS[self.needs.record_kind]

  def token_fills(self) -> Dict[str, Any]:
    """The kind's features with a token axis and their fills (RecordKind.token_fills)
    in this loader's batches."""
    return self.kind.token_fills(self.needs, self.data_config)

  def check_files(self) -> None:
    """Fails before training when the files do not fit the config, with an error
    naming the mismatch (default: no check)."""

  def settings_from_files(self) -> Dict[str, Any]:
    """Settings the input files fix that the configuration leaves unset, as nested
    overrides of the experiment (recorded in the run's params.yaml, so that the exporter
    finds them there); default none."""
    return {}

  def dataset(self, input_context: Optional[tf.distribute.InputContext] = None,
              start: int = 0) -> tf.data.Dataset:
    """Batches (dicts of tensors) with model inputs and labels, per replica:
    global_batch_size divided by the number of replicas when an input_context is
    given; the first `start` batches of this pipeline skipped."""
    raise NotImplementedError

  def host_batches(self, process_index: int = 0, process_count: int = 1,
                   seed: Optional[int] = None, **read_options) -> host_pipeline.HostBatches:
    """This process's batches as NumPy arrays, read without TensorFlow, with a
    checkpointable position (bert_tf.data.pipelines.host_pipeline).

    The same features, dtypes and names as `dataset`'s batches; token features of
    fine-tuning batches are padded to data_config's length buckets (seq_length without
    them), so that a step compiled once per shape compiles once per bucket.

    Args:
      process_index, process_count: this process among those reading the input; the
        global batch is shared by them.
      seed: of the training shuffle; default the task's (runtime.seed).
      **read_options: host_pipeline.index_batches' num_threads, prefetch_batches.

    Returns:
      HostBatches: next() gives {feature: int32/float32 [global_batch/process_count,
      ...]}; get_state() / set_state() save and restore the position.

    Raises:
      ConfigError: raw task files where tensorflow-text is not installed, naming the
        data section.
    """
    if self.data_config.format not in PREPARED_FORMATS:
      require_tensorflow_text(self.data_config)
    batch_size, order = host_pipeline.data_order(
        self.data_config, process_index, process_count,
        self.needs.seed if seed is None else seed)
    order.update(read_options)
    return self._host_batches(batch_size, order)

  def _host_batches(self, batch_size: int, order: Dict[str, Any]
                    ) -> host_pipeline.HostBatches:
    """Host batches of `batch_size` rows in `order` (host_pipeline.index_batches'
    arguments)."""
    raise NotImplementedError

  def explain_error(self, error: Exception) -> Exception:
    """The error to raise for a tf.errors.DataLossError of the input pipeline: for
    TFRecord input, a CorruptRecordError naming each corrupt file and the byte offset it
    breaks at (the files are read again to find them); otherwise, or when every file
    reads, the error itself."""
    if self.data_config.format != TFRECORD:
      return error
    bad = record_files.find_corrupt_records(self.data_config.input_path,
                                            self.data_config.compression_type)
    return record_files.corrupt_records_error(bad) if bad else error


class InMemoryLoader(DataLoader):
  """A loader of in-memory rows ({feature: [N, ...]}, numbered in file order: raw task
  files featurized once, synthetic examples), read by both forms in the one order.

  Subclasses define `arrays`; synthetic ones set `in_file_order` (no shuffle in
  training either), and may change how the rows are batched (`_tf_batches`,
  `_host_finish`) and group them (`_row_groups`).
  """

  in_file_order = False

  def arrays(self) -> Dict[str, Any]:
    """{feature: [N, ...]}, row i of each is example i."""
    raise NotImplementedError

  def _row_groups(self, arrays) -> Optional[Any]:
    """int [N], each row's group (record_order.RecordOrder's grouping), or None."""
    del arrays
    return None

  def _tf_batches(self, arrays, data_config: configs.DataConfig,
                  input_context: Optional[tf.distribute.InputContext], start: int,
                  row_groups) -> tf.data.Dataset:
    """The tf.data batches of `arrays` in the order of `data_config`."""
    return tf_data().tfrecords.ordered_array_dataset(
        arrays, data_config, self.needs.seed, input_context, start, row_groups=row_groups)

  def _host_finish(self, arrays) -> Optional[Callable]:
    """Applied to each host batch (host_pipeline.array_batches' finish)."""
    del arrays
    return None

  def dataset(self, input_context: Optional[tf.distribute.InputContext] = None,
              start: int = 0) -> tf.data.Dataset:
    data_config = self.data_config
    if self.in_file_order:
      data_config = data_config.replace(shuffle_buffer_size=0)
    arrays = self.arrays()
    return self._tf_batches(arrays, data_config, input_context, start,
                            self._row_groups(arrays))

  def _host_batches(self, batch_size, order):
    if self.in_file_order:
      order = dict(order, shuffle_window=0)
    arrays = self.arrays()
    return host_pipeline.array_batches(arrays, batch_size, self._host_finish(arrays),
                                       row_groups=self._row_groups(arrays), **order)


def register_kind(kind: RecordKind) -> RecordKind:
  """Registers a record kind (an instance) under kind.name; returns it."""
  if _KINDS.get(kind.name, kind) is not kind:
    raise ValueError(f"Record kind '{kind.name}' is registered twice")
  _KINDS[kind.name] = kind
  return kind


def get_kind(name: str) -> RecordKind:
  """The record kind registered under `name`."""
  if name not in _KINDS:
    raise ValueError(f"Unknown record kind '{name}'; kinds: {', '.join(sorted(_KINDS))}")
  return _KINDS[name]


def formats_of(kind: str) -> Tuple[str, ...]:
  """The formats records of `kind` are read in."""
  return tuple(get_kind(kind).formats)


def get_loader(needs: InputNeeds, data_config: configs.DataConfig) -> DataLoader:
  """The loader of `data_config` for a task of `needs`.

  Raises:
    ConfigError: a format the task does not read, or pack_examples with a prepared
      format, naming the data section.
  """
  section = data_config.section_name()
  fmt = data_config.format
  formats = get_kind(needs.record_kind).formats
  if fmt not in formats:
    raise configs.ConfigError(
        f"{section}.format: task '{needs.task}' reads formats "
        f"{', '.join(formats)}; got '{fmt}'")
  if data_config.pack_examples and fmt in PREPARED_FORMATS:
    raise configs.ConfigError(f"{section}.pack_examples packs examples read from raw task "
                              f"files, not format '{fmt}'")
  return formats[fmt](needs, data_config)
