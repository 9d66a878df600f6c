"""The task protocol: what the trainer and the exporter need to know about a task, and
the one registry of tasks.

A task wires a model to its inputs, loss and metrics. The trainer calls, in order:

  task = get_task(experiment_config)
  model = task.build_tuned_model()
  task.initialize(model)                       # from task.init_checkpoint, if set
  task.check_inputs(data_config)               # before the first step
  dataset = task.build_inputs(data_config, input_context)      # tf.data; or, with
  batches = task.host_inputs(data_config, process_index, process_count)  # no TF, NumPy
  # inside strategy.run, per replica:
  normalizers = task.loss_normalizers(features)  # summed over the global batch
  outputs = model(task.model_inputs(features), training=True)
  losses = task.compute_loss(features, outputs, global_batch_size, **normalizers)
  sums = task.train_metrics(features, outputs)   # (numerator, denominator) pairs
  # evaluation, per replica, then gathered to the host:
  per_example = task.eval_outputs(features, outputs)
  # on the host, after the whole evaluation input:
  metrics = task.reduce_eval(concatenated per_example arrays)

The exporter reads `export_kind` and `serving_options(data_config)`: plain data from
which the serving module registered for that kind (bert_tf.export) wraps the model.

Losses are averaged over the *global* batch, so that summing the replicas' losses
gives the loss of the whole batch (the contract of tf.nn.compute_average_loss).
Metrics are computed from decomposable sums during training and from gathered
per-example values at evaluation, so that they are exact under any strategy.

A task is one module of this package: a TaskConfig subclass and a Task subclass
decorated with `register_task(name, config_cls)`. Importing the tasks needs no
TensorFlow: it is imported where a tf.data input, raw text or an export needs it.
"""

from __future__ import annotations

import abc
import functools
import logging
import types
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, Tuple

import keras
import numpy as np

from bert_tf import configs
from bert_tf import constants
from bert_tf import kernels as kernels_lib
from bert_tf.checkpoints import restore
from bert_tf.data.pipelines import host_pipeline
from bert_tf.data.records import record_files
from bert_tf.models import float8
from bert_tf.models import lora
from bert_tf.models.bert_encoder import BertEncoder

if TYPE_CHECKING:
  import tensorflow as tf  # pylint: disable=g-bad-import-order

_TASKS: Dict[str, type] = {}

DUMMY = "dummy"
TFRECORD = "tfrecord"
# Formats read from files already featurized (or synthetic); the others are raw files.
PREPARED_FORMATS = (DUMMY, TFRECORD)


def tf_data() -> types.SimpleNamespace:
  """bert_tf's TensorFlow input modules, imported on first use so that the tasks import,
  and the JAX engine runs, without TensorFlow: the tf.data pipelines (batching,
  featurizers, pretraining_reader, squad_features, squad_records, tfds_glue, tfrecords)
  and tensorflow-text's tokenizer and vocab (`tokenizer`, `vocab`)."""
  from bert_tf.data.pipelines import batching, featurizers, pretraining_reader, squad_features  # pylint: disable=g-import-not-at-top
  from bert_tf.data.records import squad_records, tfrecords  # pylint: disable=g-import-not-at-top
  from bert_tf.data.task_files import tfds_glue  # pylint: disable=g-import-not-at-top
  from bert_tf.text import tokenizer, vocab  # pylint: disable=g-import-not-at-top
  return types.SimpleNamespace(
      batching=batching, featurizers=featurizers, pretraining_reader=pretraining_reader,
      squad_features=squad_features, squad_records=squad_records, tfds_glue=tfds_glue,
      tfrecords=tfrecords, tokenizer=tokenizer, vocab=vocab)


def register_task(name: str, config_cls: type) -> Callable[[type], type]:
  """Class decorator registering a Task under `name` with its TaskConfig subclass."""

  def decorator(cls):
    if name in _TASKS and _TASKS[name] is not cls:
      raise ValueError(f"Task '{name}' registered twice")
    if not (isinstance(config_cls, type) and issubclass(config_cls, configs.TaskConfig)):
      raise TypeError(f"Task '{name}': config_cls must be a TaskConfig subclass")
    if config_cls.name != name:
      raise ValueError(f"Task '{name}': {config_cls.__name__}.name defaults to "
                       f"'{config_cls.name}'")
    cls.name = name
    cls.config_cls = config_cls
    _TASKS[name] = cls
    return cls

  return decorator


def registered_tasks() -> Dict[str, type]:
  """{task name: Task subclass} of every registered task."""
  return dict(_TASKS)


def task_configs() -> Dict[str, type]:
  """{task name: TaskConfig subclass}, what ExperimentConfig.from_dict reads tasks with."""
  return {name: cls.config_cls for name, cls in _TASKS.items()}


def get_task(experiment: configs.ExperimentConfig) -> "Task":
  """Instantiates the task that experiment.task.name names.

  Raises:
    ConfigError: an unknown task (naming the nearest one), or a task section that was
      not read with this task's config class.
  """
  name = experiment.task.name
  if name not in _TASKS:
    nearest = configs.nearest_name(name, list(_TASKS))
    hint = f"; did you mean '{nearest}'?" if nearest else ""
    raise configs.ConfigError(f"task.name: unknown task '{name}'{hint} Tasks: "
                              f"{', '.join(sorted(_TASKS))}")
  cls = _TASKS[name]
  if not isinstance(experiment.task, cls.config_cls):
    raise configs.ConfigError(
        f"task: task '{name}' needs a {cls.config_cls.__name__}, got a "
        f"{type(experiment.task).__name__}; read the experiment with "
        "bert_tf.training.experiments (or pass task_configs=task_configs())")
  if experiment.train_data.pack_examples and not cls.packs_examples:
    raise configs.ConfigError(f"train_data.pack_examples: task '{name}' does not read "
                              "packed batches")
  return cls(experiment)


def section_name(data_config: configs.DataConfig) -> str:
  """The experiment section a data config is, for error messages."""
  return "train_data" if data_config.is_training else "eval_data"


def require_tensorflow_text(data_config: configs.DataConfig) -> None:
  """Raises ConfigError, naming the section, where raw task files cannot be featurized:
  tokenizing them needs tensorflow-text (and TensorFlow)."""
  try:
    import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    raise configs.ConfigError(
        f"{section_name(data_config)}.format '{data_config.format}': reading raw task "
        "files needs tensorflow-text: featurize them with tools/create_finetuning_data.py "
        "first and read format tfrecord") from None


class Task(abc.ABC):
  """One task family: model, inputs, loss, metrics, predictions, export.

  Class attributes (the defaults fit a task that declares nothing):
    name, config_cls: set by register_task.
    input_formats: the data_config.format values build_inputs reads. "dummy" and
      "tfrecord" go to dummy_inputs and tfrecord_inputs, any other to raw_inputs.
    packs_examples: whether the model reads batches of train_data.pack_examples.
    export_kind: the kind of serving export (bert_tf.export) of this task's model;
      "" when only its encoder can be exported.
    label_names: class or tag names in id order (instances may set them from the
      config); empty for tasks without named labels.
    regression: whether the label is a float score rather than a class id.
    progress_metrics: the training report's values the console progress line shows.
  """

  name: str = ""
  config_cls: type = configs.TaskConfig
  input_formats: Tuple[str, ...] = (DUMMY,)
  packs_examples: bool = False
  export_kind: str = ""
  label_names: Tuple[str, ...] = ()
  regression: bool = False
  progress_metrics: Tuple[str, ...] = ("loss",)

  def __init__(self, experiment: configs.ExperimentConfig):
    self.experiment = experiment
    self.config = experiment.task

  # ----- model -----
  @functools.cached_property
  def kernels(self):
    """The speed path this task's models are built with, or None for the reference
    layers (bert_tf.kernels.for_runtime of the experiment's runtime section)."""
    return kernels_lib.for_runtime(self.experiment.runtime)

  def build_encoder(self, encoder_config: Optional[configs.EncoderConfig] = None,
                    name: str = "bert_encoder") -> BertEncoder:
    """A BertEncoder of `encoder_config` (default model.encoder) in the runtime's dtype
    policy (runtime.mixed_precision_dtype; variables stay float32), built with this
    task's speed path."""
    return BertEncoder.from_config_object(
        encoder_config or self.experiment.model.encoder,
        dtype=keras.DTypePolicy(self.experiment.runtime.mixed_precision_dtype),
        name=name, kernels=self.kernels)

  @abc.abstractmethod
  def build_model(self):
    """Returns the Keras model: an encoder plus this task's output layer.

    The model exposes `checkpoint_items` (a dict of trackable objects, with at least
    `encoder`) so that `initialize` restores by object, not by variable name.
    """

  def build_tuned_model(self):
    """build_model(), given the adapters of model.lora_rank when it is set: the encoder
    restored from task.init_checkpoint, frozen, with low-rank adapters
    (bert_tf.models.lora). The model the trainer trains and the exporter restores:
    with adapters, `trained_items` holds only what trains, and the encoder always
    comes from task.init_checkpoint, on a resumed run too. With
    runtime.float8_training the block projections train in float8
    (bert_tf.models.float8), converted after the warm start from task.init_checkpoint,
    which `initialize` then reports."""
    model = self.build_model()
    settings = self.experiment.model
    if settings.lora_rank:
      if not self.config.init_checkpoint:
        raise configs.ConfigError("model.lora_rank: LoRA fine-tunes a pretrained encoder; "
                                  "set task.init_checkpoint")
      restore.restore_items(self.config.init_checkpoint, model.checkpoint_items,
                            items=("encoder",))
      lora.enable(model, settings.lora_rank, settings.lora_targets, settings.lora_alpha)
    if self.experiment.runtime.float8_training:
      # Checkpoints of plain models hold no float8 scaling state: restore into the
      # plain layers, then convert them.
      float8.check_supported(model)
      restored = self.initialize(model)
      float8.enable(model)
      object.__setattr__(model, "initialized_when_built", restored)
    return model

  def model_inputs(self, features: Mapping[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """Selects the model's inputs from a batch that also carries labels."""
    return {name: features[name] for name in self.input_names()}

  def input_names(self) -> Tuple[str, ...]:
    return constants.ENCODER_INPUTS

  def initialize(self, model) -> Dict[str, str]:
    """Restores `checkpoint_items` from task.init_checkpoint, when set.

    Restores every item that both the checkpoint and the model hold (by default the
    encoder) and asserts that each of those was fully matched.

    Returns:
      {item name: checkpoint path} of what was restored.
    """
    path = self.config.init_checkpoint
    if not path or getattr(model, "lora_adapters", None) is not None:
      # A LoRA model's encoder was restored when it was built (build_tuned_model).
      return {}
    if hasattr(model, "initialized_when_built"):
      return dict(model.initialized_when_built)
    restored = restore.restore_items(path, model.checkpoint_items,
                                     items=self.init_checkpoint_items())
    for item in restored:
      logging.info("Initialized %s from %s", item, path)
    return restored

  def init_checkpoint_items(self) -> Tuple[str, ...]:
    """Which checkpoint_items a warm start restores (fine-tuning: the encoder only)."""
    return ("encoder",)

  # ----- data -----
  def build_inputs(self, data_config: configs.DataConfig,
                   input_context: Optional[tf.distribute.InputContext] = None,
                   start: int = 0) -> tf.data.Dataset:
    """Returns batches (dicts of tensors) with model inputs and labels.

    Batches are per replica: global_batch_size divided by the number of replicas
    when an input_context is given. Checks data_config.format against
    input_formats, then reads with dummy_inputs, tfrecord_inputs or raw_inputs.
    `start` batches (of this input pipeline) are skipped: TFRecords are read by
    number in the order of bert_tf.data.records.record_order, and skip without reading.

    Raises:
      ConfigError: a format the task does not read, naming the data section.
    """
    self.check_format(data_config)
    fmt = data_config.format
    if fmt == TFRECORD:
      return self.tfrecord_inputs(data_config, input_context, start)
    if fmt == DUMMY:
      dataset = self.dummy_inputs(data_config, input_context)
    else:
      dataset = self.raw_inputs(data_config, input_context)
    return dataset.skip(start) if start else dataset

  def host_inputs(self, data_config: configs.DataConfig, process_index: int = 0,
                  process_count: int = 1, seed: Optional[int] = None,
                  **read_options) -> host_pipeline.HostBatches:
    """This process's batches as NumPy arrays, read without TensorFlow, with a
    checkpointable position (bert_tf.data.pipelines.host_pipeline).

    The same features, dtypes and names as build_inputs' batches; token features of
    fine-tuning batches are padded to data_config's length buckets (seq_length without
    them), so that a step compiled once per shape compiles once per bucket.

    Args:
      data_config: the data section; its global batch is shared by the processes.
      process_index, process_count: this process among those reading the input.
      seed: of the training shuffle; default runtime.seed.
      **read_options: host_pipeline.index_batches' num_threads, prefetch_batches.

    Returns:
      HostBatches: next() gives {feature: int32/float32 [global_batch/process_count,
      ...]}; get_state() / set_state() save and restore the position.

    Raises:
      ConfigError: a format the task does not read, or one that needs TensorFlow where
        it is not installed, naming the data section.
    """
    self.check_format(data_config)
    batch_size, order = host_pipeline.data_order(
        data_config, process_index, process_count,
        self.experiment.runtime.seed if seed is None else seed)
    order.update(read_options)
    if data_config.format == DUMMY:
      return self.dummy_host_inputs(data_config, batch_size, order)
    if data_config.format == TFRECORD:
      return self.tfrecord_host_inputs(data_config, batch_size, order)
    require_tensorflow_text(data_config)
    return self.raw_host_inputs(data_config, batch_size, order)

  def dummy_host_inputs(self, data_config: configs.DataConfig, batch_size: int,
                        order: Dict[str, Any]) -> host_pipeline.HostBatches:
    """Synthetic host batches (format "dummy"): `batch_size` rows each, ordered by
    `order` (host_pipeline.index_batches' arguments)."""
    raise NotImplementedError(f"Task '{self.name}' has no synthetic host input")

  def tfrecord_host_inputs(self, data_config: configs.DataConfig, batch_size: int,
                           order: Dict[str, Any]) -> host_pipeline.HostBatches:
    """Host batches of this task's TFRecords (format "tfrecord")."""
    raise NotImplementedError(f"Task '{self.name}' reads no TFRecords")

  def raw_host_inputs(self, data_config: configs.DataConfig, batch_size: int,
                      order: Dict[str, Any]) -> host_pipeline.HostBatches:
    """Host batches of raw task files, featurized in memory (needs TensorFlow)."""
    raise configs.ConfigError(
        f"{section_name(data_config)}.format '{data_config.format}': task '{self.name}' "
        "reads raw files only through tf.data; featurize them with "
        "tools/create_finetuning_data.py and read format tfrecord")

  def check_format(self, data_config: configs.DataConfig) -> None:
    """Raises ConfigError, naming the data section, for a format outside input_formats
    (or pack_examples with a format that is not raw files)."""
    section = section_name(data_config)
    fmt = data_config.format
    if fmt not in self.input_formats:
      raise configs.ConfigError(
          f"{section}.format: task '{self.name}' reads formats "
          f"{', '.join(self.input_formats)}; got '{fmt}'")
    if data_config.pack_examples and fmt in PREPARED_FORMATS:
      raise configs.ConfigError(f"{section}.pack_examples packs examples read from raw task "
                                f"files, not format '{fmt}'")

  @abc.abstractmethod
  def dummy_inputs(self, data_config: configs.DataConfig,
                   input_context: Optional[tf.distribute.InputContext] = None
                   ) -> tf.data.Dataset:
    """Synthetic batches of the structure real ones have (format "dummy")."""

  def tfrecord_inputs(self, data_config: configs.DataConfig,
                      input_context: Optional[tf.distribute.InputContext] = None,
                      start: int = 0) -> tf.data.Dataset:
    """Batches read from this task's TFRecords (format "tfrecord"), the first `start`
    skipped unread."""
    raise NotImplementedError(f"Task '{self.name}' reads no TFRecords")

  def raw_inputs(self, data_config: configs.DataConfig,
                 input_context: Optional[tf.distribute.InputContext] = None
                 ) -> tf.data.Dataset:
    """Batches featurized from raw task files (any other declared format)."""
    raise NotImplementedError(f"Task '{self.name}' reads no raw files")

  def check_inputs(self, data_config: configs.DataConfig) -> None:
    """Fails before training when the input does not fit the config (default: no
    check). Raises an error naming the mismatch."""

  def settings_from_inputs(self, data_config: configs.DataConfig) -> Dict[str, Any]:
    """Settings the input files fix that the configuration leaves unset, as nested
    overrides of the experiment (recorded in the run's params.yaml, so that the exporter
    finds them there); default none."""
    return {}

  def explain_input_error(self, error: Exception, data_config: configs.DataConfig
                          ) -> Exception:
    """The error to raise for a tf.errors.DataLossError of the input pipeline: for
    TFRecord input, a CorruptRecordError naming each corrupt file and the byte offset it
    breaks at (the files are read again to find them); otherwise, or when every file
    reads, the error itself."""
    if data_config.format != TFRECORD:
      return error
    bad = record_files.find_corrupt_records(data_config.input_path,
                                            data_config.compression_type)
    return record_files.corrupt_records_error(bad) if bad else error

  # ----- loss and metrics -----
  def loss_normalizers(self, features) -> Dict[str, tf.Tensor]:
    """Float32 scalar sums over a replica's batch that the trainer adds up over the
    whole global batch and passes to compute_loss as keyword arguments (default:
    none)."""
    return {}

  @abc.abstractmethod
  def compute_loss(self, features, outputs, global_batch_size: int) -> Dict[str, tf.Tensor]:
    """Float32 scalar losses of one replica's batch, averaged over the global batch.

    Returns a dict with at least "loss" (the one optimized).
    """

  def train_metrics(self, features, outputs) -> Dict[str, Tuple[Any, Any]]:
    """Decomposable metrics: {name: (numerator, denominator)} float32 scalars.

    The trainer sums numerators and denominators over replicas and steps
    (bert_tf.metrics.sums builds them).
    """
    return {}

  def eval_outputs(self, features, outputs) -> Dict[str, tf.Tensor]:
    """Per-example values that `reduce_eval` turns into metrics; the leading dim is B."""
    return {}

  def reduce_eval(self, values: Dict[str, np.ndarray]) -> Dict[str, float]:
    """Final evaluation metrics from the concatenated `eval_outputs` of every batch."""
    return {}

  # ----- predictions -----
  def write_predictions(self, values: Dict[str, np.ndarray], output_dir: str) -> Optional[str]:
    """Writes this task's prediction file(s) from gathered eval outputs; returns a path."""
    return None

  # ----- export -----
  def serving_options(self, data_config: configs.DataConfig) -> Dict[str, Any]:
    """Keyword arguments of the serving module of export_kind (plain values: label
    names, whether inputs are pairs, answer lengths, ...), given the data section
    whose vocab and lengths the export uses."""
    return {}

