"""The task protocol: what the trainer and the exporter need to know about a task, and
the one registry of tasks.

A task wires a model to its loss and metrics, and declares the records it reads: its
input comes from the data loader of its record kind for the data section's format.
Tasks read no files: the record kinds read and featurize them
(bert_tf.data.pipelines.loaders, bert_tf.data.task_files.readers). The trainer calls, in order:

  task = get_task(experiment_config)
  model = trained_model.build(task)              # bert_tf.training.trained_model
  task.initialize(model)                       # from task.init_checkpoint, if set
  loader = task.data_loader(data_config)       # bert_tf.data.pipelines.loaders
  loader.check_files()                         # before the first step
  dataset = loader.dataset(input_context)      # tf.data; or, with no TF, NumPy:
  batches = loader.host_batches(process_index, process_count)
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
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, Tuple

import keras
import numpy as np

from bert_tf import configs
from bert_tf import constants
from bert_tf import kernels as kernels_lib
from bert_tf.checkpoints import restore
from bert_tf.data.pipelines import loaders
from bert_tf.models.bert_encoder import BertEncoder

if TYPE_CHECKING:
  import tensorflow as tf  # pylint: disable=g-bad-import-order

_TASKS: Dict[str, type] = {}


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


class Task(abc.ABC):
  """One task family: model, loss, metrics, predictions, export, and the records it
  reads.

  Class attributes (the defaults fit a task that declares nothing):
    name, config_cls: set by register_task.
    record_kind: the kind of records the task reads; its data loaders are those of the
      record kind registered under that name (bert_tf.data.pipelines.loaders), one
      per format.
    input_names: the model's inputs among a batch's features.
    init_checkpoint_items: which checkpoint_items a warm start restores (fine-tuning:
      the encoder only).
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
  record_kind: str = ""
  input_names: Tuple[str, ...] = constants.ENCODER_INPUTS
  init_checkpoint_items: Tuple[str, ...] = ("encoder",)
  packs_examples: bool = False
  export_kind: str = ""
  label_names: Tuple[str, ...] = ()
  regression: bool = False
  progress_metrics: Tuple[str, ...] = ("loss",)

  def __init__(self, experiment: configs.ExperimentConfig):
    self.experiment = experiment
    self.config = experiment.task
    # The Keras dtype policy this task's models are built in: the runtime's
    # (runtime.mixed_precision_dtype; variables stay float32). A bf16 serving export
    # (bert_tf.export.exporter) sets it to 'bfloat16', variables included; the layers
    # keep LayerNorm and softmax in float32 under every policy.
    self.dtype_policy = keras.DTypePolicy(experiment.runtime.mixed_precision_dtype)

  # ----- model -----
  @functools.cached_property
  def kernels(self):
    """The speed path this task's models are built with, or None for the reference
    layers (bert_tf.kernels.for_runtime of the experiment's runtime section)."""
    return kernels_lib.for_runtime(self.experiment.runtime)

  def build_encoder(self, encoder_config: Optional[configs.EncoderConfig] = None,
                    name: str = "bert_encoder") -> BertEncoder:
    """A BertEncoder of `encoder_config` (default model.encoder) in this task's
    `dtype_policy`, built with this task's speed path."""
    return BertEncoder.from_config_object(
        encoder_config or self.experiment.model.encoder, dtype=self.dtype_policy,
        name=name, kernels=self.kernels)

  @abc.abstractmethod
  def build_model(self):
    """Returns the Keras model: an encoder plus this task's output layer.

    The model exposes `checkpoint_items` (a dict of trackable objects, with at least
    `encoder`) so that `initialize` restores by object, not by variable name.
    """

  def model_inputs(self, features: Mapping[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """Selects the model's inputs from a batch that also carries labels."""
    return {name: features[name] for name in self.input_names}

  def initialize(self, model) -> Dict[str, str]:
    """Restores `checkpoint_items` from task.init_checkpoint, when set.

    Restores every item that both the checkpoint and the model hold (by default the
    encoder) and asserts that each of those was fully matched.

    Returns:
      {item name: checkpoint path} of what was restored.
    """
    path = self.config.init_checkpoint
    if not path or getattr(model, "lora_adapters", None) is not None:
      # A LoRA model's encoder was restored when it was built
      # (bert_tf.training.trained_model).
      return {}
    if hasattr(model, "initialized_when_built"):
      return dict(model.initialized_when_built)
    restored = restore.restore_items(path, model.checkpoint_items,
                                     items=self.init_checkpoint_items)
    for item in restored:
      logging.info("Initialized %s from %s", item, path)
    return restored

  # ----- data -----
  @functools.cached_property
  def input_needs(self) -> loaders.InputNeeds:
    """What this task's loaders need of it (bert_tf.data.pipelines.loaders.InputNeeds):
    the record kind, the seed, the model's vocab size, the tokenizer section, the
    labels, and as options the task section's settings (label_names as this task
    resolved them), which its kind's featurizer and the readers of raw files take by
    name. One per task: what its loaders read once is kept there."""
    return loaders.InputNeeds(
        task=self.name, record_kind=self.record_kind, seed=self.experiment.runtime.seed,
        vocab_size=self.experiment.model.encoder.vocab_size,
        vocab_file=self.experiment.tokenizer.vocab_file,
        lower_case=self.experiment.tokenizer.lower_case, regression=self.regression,
        label_names=tuple(self.label_names),
        options=dict(self.config.as_dict(), label_names=list(self.label_names)))

  def data_loader(self, data_config: configs.DataConfig) -> loaders.DataLoader:
    """The loader of data_config's records (bert_tf.data.pipelines.loaders): `dataset()`
    gives tf.data batches, `host_batches()` NumPy ones without TensorFlow.

    Raises:
      ConfigError: a format no loader of this task's record kind reads, naming the data
        section.
    """
    return loaders.get_loader(self.input_needs, data_config)

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

