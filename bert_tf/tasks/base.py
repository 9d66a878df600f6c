"""The task protocol: what the trainer needs to know about a task, and the registry.

A task wires a model to its inputs, loss and metrics. The trainer calls, in order:

  task = get_task(experiment_config)
  model = task.build_model()
  task.initialize(model)                       # from task.init_checkpoint, if set
  dataset = task.build_inputs(data_config, input_context)
  # inside strategy.run, per replica:
  outputs = model(task.model_inputs(features), training=True)
  losses = task.compute_loss(features, outputs, global_batch_size)
  sums = task.train_metrics(features, outputs)   # (numerator, denominator) pairs
  # evaluation, per replica, then gathered to the host:
  per_example = task.eval_outputs(features, outputs)
  # on the host, after the whole evaluation input:
  metrics = task.reduce_eval(concatenated per_example arrays)

Losses are averaged over the *global* batch, so that summing the replicas' losses
gives the loss of the whole batch (the contract of tf.nn.compute_average_loss).
Metrics are computed from decomposable sums during training and from gathered
per-example values at evaluation, so that they are exact under any strategy.
"""

from __future__ import annotations

import abc
import logging
from typing import Callable, Dict, Mapping, Optional, Tuple

import numpy as np
import tensorflow as tf

from bert_tf import configs
from bert_tf import constants

_TASKS: Dict[str, type] = {}


def register_task(name: str, config_cls: type) -> Callable[[type], type]:
  """Class decorator registering a Task under `name` with its TaskConfig class."""

  def decorator(cls):
    if name in _TASKS and _TASKS[name] is not cls:
      raise ValueError(f"Task '{name}' registered twice")
    configs.register_task_config(name)(config_cls)
    cls.name = name
    cls.config_cls = config_cls
    _TASKS[name] = cls
    return cls

  return decorator


def registered_tasks() -> Dict[str, type]:
  configs._import_task_modules()  # pylint: disable=protected-access
  return dict(_TASKS)


def get_task(experiment: configs.ExperimentConfig) -> "Task":
  """Instantiates the task that experiment.task.name names."""
  tasks = registered_tasks()
  name = experiment.task.name
  if name not in tasks:
    raise configs.ConfigError(f"task.name: unknown task '{name}'. Tasks: "
                              f"{', '.join(sorted(tasks))}")
  if experiment.train_data.pack_examples and not tasks[name].packs_examples:
    raise configs.ConfigError(f"train_data.pack_examples: task '{name}' does not read "
                              "packed batches")
  return tasks[name](experiment)


class Task(abc.ABC):
  """One task family: model, inputs, loss, metrics, predictions."""

  name: str = ""
  config_cls: type = configs.TaskConfig
  # Whether the model reads batches of train_data.pack_examples.
  packs_examples: bool = False

  def __init__(self, experiment: configs.ExperimentConfig):
    self.experiment = experiment
    self.config = experiment.task

  # ----- model -----
  @abc.abstractmethod
  def build_model(self):
    """Returns the Keras model: an encoder plus this task's output layer.

    The model exposes `checkpoint_items` (a dict of trackable objects, with at least
    `encoder`) so that `initialize` restores by object, not by variable name.
    """

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
    if not path:
      return {}
    from bert_tf.training import checkpoints  # pylint: disable=g-import-not-at-top
    restored = checkpoints.restore_items(path, model.checkpoint_items,
                                         items=self.init_checkpoint_items())
    for item in restored:
      logging.info("Initialized %s from %s", item, path)
    return restored

  def init_checkpoint_items(self) -> Tuple[str, ...]:
    """Which checkpoint_items a warm start restores (fine-tuning: the encoder only)."""
    return ("encoder",)

  # ----- data -----
  @abc.abstractmethod
  def build_inputs(self, data_config: configs.DataConfig,
                   input_context: Optional[tf.distribute.InputContext] = None
                   ) -> tf.data.Dataset:
    """Returns batches (dicts of tensors) with model inputs and labels.

    Batches are per replica: global_batch_size divided by the number of replicas
    when an input_context is given. data_config.format == "dummy" yields synthetic
    batches of the right structure.
    """

  # ----- loss and metrics -----
  @abc.abstractmethod
  def compute_loss(self, features, outputs, global_batch_size: int) -> Dict[str, tf.Tensor]:
    """Float32 scalar losses of one replica's batch, averaged over the global batch.

    Returns a dict with at least "loss" (the one optimized).
    """

  def train_metrics(self, features, outputs) -> Dict[str, Tuple[tf.Tensor, tf.Tensor]]:
    """Decomposable metrics: {name: (numerator, denominator)} float32 scalars.

    The trainer sums numerators and denominators over replicas and steps.
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


def ratio(numerator, denominator) -> Tuple[tf.Tensor, tf.Tensor]:
  """A (numerator, denominator) metric pair as float32 tensors."""
  return tf.cast(numerator, tf.float32), tf.cast(denominator, tf.float32)
