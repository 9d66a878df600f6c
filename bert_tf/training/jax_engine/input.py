"""The JAX engine's input: batches of NumPy arrays, this process's share of each global
batch, padded to fixed lengths (the length buckets) so that the jit-compiled step
compiles once per bucket, with a position saved beside each checkpoint.

Batches come from the task's tf.data input (TensorFlow runs on the host only, off the
accelerators JAX uses), its position a tf.data iterator state beside the checkpoint.
"""

from typing import Callable, Dict, Iterator, Optional

import numpy as np

from bert_tf import configs
from bert_tf.tasks import base as task_base


def host_batch(batch) -> Dict[str, np.ndarray]:
  """A batch as NumPy arrays JAX takes: 64-bit values as 32-bit (JAX computes in 32
  bits), non-numeric features (strings) left out."""
  out = {}
  for key, value in batch.items():
    array = value.numpy() if hasattr(value, "numpy") else np.asarray(value)
    if array.dtype == np.int64:
      array = array.astype(np.int32)
    elif array.dtype == np.float64:
      array = array.astype(np.float32)
    elif array.dtype.kind not in "biuf":
      continue
    out[key] = array
  return out


class TfDataInput:
  """This process's training batches from the task's tf.data input."""

  def __init__(self, task: task_base.Task, data_config: configs.DataConfig,
               process_index: int, process_count: int, step: int,
               checkpoint: Optional[str], log_fn: Callable[[str], None]):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from bert_tf.training.tf_engine import input as tf_input  # pylint: disable=g-import-not-at-top
    self._tf_input = tf_input
    context = tf.distribute.InputContext(num_input_pipelines=process_count,
                                         input_pipeline_id=process_index,
                                         num_replicas_in_sync=process_count)
    dataset = tf_input.padded_to_length_buckets(task.build_inputs(data_config, context),
                                                data_config)
    iterator = iter(dataset)
    if step and not (checkpoint and tf_input.restore_position(
        iterator, checkpoint, process_index, log_fn=log_fn)):
      iterator = iter(dataset.skip(step))
      log_fn(f"No input iterator restored from {checkpoint}: skipped the {step} consumed "
             "batches")
    self._iterator = iterator

  def next_batch(self) -> Dict[str, np.ndarray]:
    return host_batch(next(self._iterator))

  def save_position(self, checkpoint: str, process_index: int) -> None:
    self._tf_input.save_position(self._iterator, checkpoint, process_index)


def training_input(task: task_base.Task, data_config: configs.DataConfig,
                   process_index: int, process_count: int, seed: int, step: int,
                   checkpoint: Optional[str], log_fn: Callable[[str], None]):
  """This process's training input at global step `step`, at the position saved with
  `checkpoint` where it holds one, else after skipping the consumed batches."""
  del seed
  return TfDataInput(task, data_config, process_index, process_count, step, checkpoint,
                     log_fn)


def evaluation_batches(task: task_base.Task, data_config: configs.DataConfig
                       ) -> Iterator[Dict[str, np.ndarray]]:
  """The whole evaluation input, every batch, as NumPy arrays."""
  for batch in task.build_inputs(data_config):
    yield host_batch(batch)


def corrupt_input_error(task: task_base.Task, error: Exception,
                        data_config: configs.DataConfig) -> Optional[Exception]:
  """The error naming the corrupt record that `error` met, or None."""
  import sys  # pylint: disable=g-import-not-at-top
  if "tensorflow" not in sys.modules or sys.modules["tensorflow"] is None:
    return None
  from bert_tf.training.tf_engine import input as tf_input  # pylint: disable=g-import-not-at-top
  return tf_input.corrupt_input_error(task, error, data_config)
