"""Evaluation's report, for every engine: the task's eval outputs of every batch,
gathered to the host, reduced to metrics by the task, written to TensorBoard and, on the
chief, to the task's prediction files."""

import os
from typing import Callable, Dict

import numpy as np

from bert_tf.tasks import base as task_base
from bert_tf.training.summaries import SummaryWriter
from bert_tf.utils import errors

PREDICTIONS_DIR = "predictions"


def predictions_dir(model_dir: str, step: int) -> str:
  """Where the evaluation at `step` writes the task's prediction files."""
  return os.path.join(model_dir, PREDICTIONS_DIR, f"step_{step}")


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
