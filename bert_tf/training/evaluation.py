"""Evaluation: the task's eval outputs of every batch, gathered to the host, reduced to
metrics by the task, written to TensorBoard and, on the chief, to the task's prediction
files (`report`, for the trainers of every backend), and the TensorFlow trainer's
distributed evaluation step."""

import os
from typing import Callable, Dict

import keras
import numpy as np
import tensorflow as tf

from bert_tf import configs
from bert_tf.tasks import base as task_base
from bert_tf.training.summaries import SummaryWriter
from bert_tf.utils import errors

PREDICTIONS_DIR = "predictions"


def predictions_dir(model_dir: str, step: int) -> str:
  """Where the evaluation at `step` writes the task's prediction files."""
  return os.path.join(model_dir, PREDICTIONS_DIR, f"step_{step}")


def make_eval_step(strategy: tf.distribute.Strategy, model: keras.Model,
                   task: task_base.Task):
  """The tf.function eval_step(distributed batch) -> {output: [global batch, ...]}: the
  task's eval outputs of every replica, gathered."""

  def replica_eval(features):
    outputs = model(task.model_inputs(features), training=False)
    return task.eval_outputs(features, outputs)

  # Batches are padded to their longest example: without reduce_retracing every new
  # length would trace the step again.
  @tf.function(reduce_retracing=True)
  def eval_step(features):
    per_replica = strategy.run(replica_eval, args=(features,))
    # Gathered one tensor at a time: strategy.gather of the whole dict returns only
    # the first replica's values under MirroredStrategy in TF 2.21.
    return {key: strategy.gather(value, axis=0) for key, value in per_replica.items()}

  return eval_step


def evaluate(eval_step, dataset, steps: int, task: task_base.Task,
             data_config: configs.DataConfig, model_dir: str, step: int, is_chief: bool,
             log_fn: Callable[[str], None]) -> Dict[str, float]:
  """Runs eval_step over the distributed `dataset` (its first `steps` batches; 0: all)
  and reports the metrics of the whole (`report`)."""
  gathered: Dict[str, list] = {}
  try:
    for i, features in enumerate(dataset):
      if steps and i >= steps:
        break
      values = eval_step(features)
      for key, value in values.items():
        gathered.setdefault(key, []).append(np.asarray(value))
  except tf.errors.DataLossError as e:
    raise task.explain_input_error(e, data_config) from e
  return report(task, gathered, model_dir, step, is_chief, log_fn)


def report(task: task_base.Task, gathered: Dict[str, list], model_dir: str, step: int,
           is_chief: bool, log_fn: Callable[[str], None]) -> Dict[str, float]:
  """task.reduce_eval's metrics of the eval outputs `gathered` ({output: [one array
  per batch]}), written to TensorBoard under model_dir/eval at `step`, with the
  predictions under predictions_dir(model_dir, step) on the chief.

  Raises:
    InputError: no batch was gathered.
  """
  if not gathered:
    raise errors.InputError("The evaluation input (eval_data) yielded no batch")
  values = {k: np.concatenate(v) for k, v in gathered.items()}
  metrics = task.reduce_eval(values)
  writer = SummaryWriter(model_dir, "eval", enabled=is_chief)
  writer.write(metrics, step)
  writer.close()
  shown = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items())
  log_fn(f"Evaluation at step {step}: {shown}")
  if is_chief:
    written = task.write_predictions(values, predictions_dir(model_dir, step))
    if written:
      log_fn(f"Wrote predictions {written}")
  return metrics
