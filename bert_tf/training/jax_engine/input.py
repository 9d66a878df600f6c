"""The JAX engine's input: batches of NumPy arrays, this process's share of each global
batch, padded to fixed lengths (the length buckets) so that the jit-compiled step
compiles once per bucket, with a position saved beside each checkpoint.

Batches come from the host form of the task's data loader (bert_tf.data.pipelines.loaders,
bert_tf.data.pipelines.host_pipeline):
TFRecords read without TensorFlow, or raw task files featurized once where
tensorflow-text is installed; dynamic masking draws its masks there too
(bert_tf.data.pipelines.masking) and packing packs there (bert_tf.data.pipelines.example_packing).
Its position is a small JSON file beside the checkpoint (`ckpt-N.input[-P].json`).

A checkpoint without a position of this input (written by the other engine, or by
another input) resumes by skipping the consumed batches: with the same files, seed and
order, the very batches an uninterrupted run would read next.
"""

import json
import os
from typing import Callable, Dict, Iterator, Optional

import numpy as np

from bert_tf import configs
from bert_tf.checkpoints import portable
from bert_tf.data.records import record_files
from bert_tf.tasks import base as task_base

POSITION_SUFFIX = ".json"


def position_path(checkpoint: str, process_index: int) -> str:
  """`ckpt-N.input[-P].json` beside the portable checkpoint `ckpt-N.h5`."""
  return portable.input_prefix(checkpoint, process_index) + POSITION_SUFFIX


class HostInput:
  """This process's training batches from the data loader's host form."""

  def __init__(self, task: task_base.Task, data_config: configs.DataConfig,
               process_index: int, process_count: int, step: int,
               checkpoint: Optional[str], log_fn: Callable[[str], None]):
    self._batches = task.data_loader(data_config).host_batches(process_index, process_count)
    saved = position_path(checkpoint, process_index) if checkpoint else None
    if saved and os.path.exists(saved):
      with open(saved, encoding="utf-8") as f:
        self._batches.set_state(json.load(f))
    elif step:
      self._batches.seek(step)
      log_fn(f"No input position of this input saved with {checkpoint}: skipped the "
             f"{step} consumed batches")

  def next_batch(self) -> Dict[str, np.ndarray]:
    return next(self._batches)

  def save_position(self, checkpoint: str, process_index: int) -> None:
    path = position_path(checkpoint, process_index)
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as f:
      json.dump(self._batches.get_state(), f)
    os.replace(temporary, path)


def training_input(task: task_base.Task, data_config: configs.DataConfig,
                   process_index: int, process_count: int, step: int,
                   checkpoint: Optional[str], log_fn: Callable[[str], None]):
  """This process's training input at global step `step`, at the position saved with
  `checkpoint` where it holds one of this input, else after skipping the consumed
  batches."""
  return HostInput(task, data_config, process_index, process_count, step, checkpoint,
                   log_fn)


def evaluation_batches(task: task_base.Task, data_config: configs.DataConfig
                       ) -> Iterator[Dict[str, np.ndarray]]:
  """The whole evaluation input, every batch, as NumPy arrays (this process reads all
  of it)."""
  batches = task.data_loader(data_config).host_batches()
  try:
    yield from batches
  finally:
    batches.close()


def corrupt_input_error(task: task_base.Task, error: Exception,
                        data_config: configs.DataConfig) -> Optional[Exception]:
  """The error naming the corrupt record that `error` met (the host input reads records
  by number and names the file and offset itself), or None."""
  del task, data_config  # The TensorFlow engine's input needs them to explain its errors.
  return error if isinstance(error, record_files.CorruptRecordError) else None
