"""The JAX engine's input: batches of NumPy arrays, this process's share of each global
batch, padded to fixed lengths (the length buckets) so that the jit-compiled step
compiles once per bucket, with a position saved beside each checkpoint.

Batches come from the host form of the task's data loader (bert_tf.data.pipelines.loaders,
bert_tf.data.pipelines.host_pipeline):
TFRecords read without TensorFlow, or raw task files featurized once where
tensorflow-text is installed; dynamic masking draws its masks there too
(bert_tf.data.pipelines.masking) and packing packs there (bert_tf.data.pipelines.example_packing).

The Trainer's input source (bert_tf.training.input_source) positions it (the position
is in the checkpoint); earlier versions kept it in a small JSON file beside the
checkpoint (`ckpt-N.input[-P].json`), which `restore` still reads.
"""

import json
import os
from typing import Callable, Dict, Iterator, Optional

import numpy as np

from bert_tf import configs
from bert_tf.checkpoints import portable
from bert_tf.data.records import record_files
from bert_tf.data.records import record_specs
from bert_tf.tasks import base as task_base
from bert_tf.training import input_source

POSITION_SUFFIX = ".json"


def position_path(checkpoint: str, process_index: int) -> str:
  """`ckpt-N.input[-P].json` beside the portable checkpoint `ckpt-N.h5` (earlier
  versions)."""
  return portable.input_prefix(checkpoint, process_index) + POSITION_SUFFIX


class HostInput(input_source.EngineInput):
  """This process's training batches from the data loader's host form, opened on first
  use.

  Args:
    task: the task whose data loader gives the batches.
    data_config: the training data.
    process_index, process_count: this process's share of each global batch.
    log_fn: receives each console line.
  """

  def __init__(self, task: task_base.Task, data_config: configs.DataConfig,
               process_index: int, process_count: int,
               log_fn: Callable[[str], None] = lambda _: None):
    self.task = task
    self.log_fn = log_fn
    self.data_config = data_config
    self._share = (process_index, process_count)
    self._open = None

  @property
  def _batches(self):
    if self._open is None:
      self._open = self.task.data_loader(self.data_config).host_batches(*self._share)
    return self._open

  def next_batch(self) -> Dict[str, np.ndarray]:
    return next(self._batches)

  def restore(self, checkpoint: str, process_index: int) -> bool:
    saved = position_path(checkpoint, process_index)
    if not os.path.exists(saved):
      return False
    try:
      with open(saved, encoding="utf-8") as f:
        state = json.load(f)
      self._batches.set_state(state)
    except (OSError, ValueError, KeyError, TypeError) as e:  # cut, damaged or foreign
      self.log_fn(f"Cannot restore the input position from {saved} "
                  f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
      return False
    return True

  def skip(self, steps: int) -> None:
    self._batches.seek(steps)

  def corrupt_record_error(self, error: Exception, data_config: configs.DataConfig
                           ) -> Optional[Exception]:
    return corrupt_input_error(self.task, error, data_config)


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
  """The error naming the corrupt record, or the record holding a token id beyond the
  model's vocab, that `error` met (the host input reads records by number and names
  the file and offset itself), or None."""
  del task, data_config  # The TensorFlow engine's input needs them to explain its errors.
  named = (record_files.CorruptRecordError, record_specs.TokenIdError)
  return error if isinstance(error, named) else None
