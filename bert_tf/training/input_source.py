"""The training input as the Trainer sees it: its position, the resume, the position
saved beside each checkpoint and the corrupt-record error, written once for both engines.

An engine gives only how its batches are made and placed on its devices, as an
`EngineInput` (bert_tf.training.tf_engine.input, bert_tf.training.jax_engine.input):
each writes its position in its own format beside `ckpt-N.h5` (`ckpt-N.input[-P]...`,
one file per process), so the model_dirs of earlier versions resume as before. A
checkpoint without a position of this input (written by the other engine, for other
data shapes, or under a strategy whose iterator is not saved) resumes by skipping the
consumed batches: with the same files, seed and order, the very batches an
uninterrupted run would read next.
"""

import abc
import contextlib
import glob
import os
import shutil
import tempfile
from typing import Callable, Iterator, Optional

from bert_tf import configs
from bert_tf.checkpoints import portable
from bert_tf.utils import file_systems
from bert_tf.utils import files


class EngineInput(abc.ABC):
  """What an engine's training input does for the InputSource (the engine's steps read
  its batches). Every member but `corrupt_record_error` concerns the position only."""

  # Why the position is never saved (e.g. "MultiWorkerMirroredStrategy has no
  # checkpointable input iterator"), or None where it is.
  unsaved_reason: Optional[str] = None

  @abc.abstractmethod
  def restore(self, checkpoint: str, process_index: int) -> bool:
    """Starts at the position of process `process_index` saved beside the local
    `checkpoint`; False (logging why where one was saved but does not fit) if there is
    none of this input."""

  @abc.abstractmethod
  def skip(self, steps: int) -> None:
    """Starts after the batches of `steps` global steps."""

  @abc.abstractmethod
  def save(self, checkpoint: str, process_index: int) -> None:
    """Writes the current position of process `process_index` beside the local
    `checkpoint` (no-op where it is never saved)."""

  @abc.abstractmethod
  def corrupt_record_error(self, error: Exception, data_config: configs.DataConfig
                           ) -> Optional[Exception]:
    """The error to report when `error`, raised while reading `data_config` (training
    or evaluation), means a corrupt input record (naming the file and offset where it
    can), else None."""


class InputSource:
  """The training input of one Trainer, over its engine's input.

  Args:
    engine_input: the engine's EngineInput.
    process_index: this process's number, which names its position file.
    log_fn: receives each console line.
  """

  def __init__(self, engine_input: EngineInput, process_index: int,
               log_fn: Callable[[str], None]):
    self.engine_input = engine_input
    self.process_index = process_index
    self._log = log_fn
    self.started = False

  def start(self, step: int, checkpoint: Optional[str], restore_position: bool = True
            ) -> None:
    """Positions the input at global step `step`: at the position saved beside
    `checkpoint` where it holds one of this input (and restore_position), else after
    skipping the `step` consumed batches, with a line saying so."""
    restored = False
    if checkpoint is not None and restore_position:
      with local_input_positions(checkpoint) as local:
        restored = self.engine_input.restore(local, self.process_index)
    if not restored and step:
      self.engine_input.skip(step)
      reason = (self.engine_input.unsaved_reason or
                f"No input position of this input saved with {checkpoint}")
      self._log(f"{reason}: skipped the {step} consumed batches")
    self.started = True

  def save(self, checkpoint: str) -> Optional[str]:
    """Writes this process's position beside `checkpoint`, or for a remote one into a
    new local folder, which it returns for the checkpoint's writer to upload (None
    otherwise)."""
    if not file_systems.is_remote(checkpoint):
      self.engine_input.save(checkpoint, self.process_index)
      return None
    local_dir = tempfile.mkdtemp()
    try:
      self.engine_input.save(os.path.join(local_dir, os.path.basename(checkpoint)),
                             self.process_index)
    except BaseException:
      shutil.rmtree(local_dir)
      raise
    return local_dir

  def corrupt_record_error(self, error: Exception, data_config: configs.DataConfig
                           ) -> Optional[Exception]:
    """See EngineInput.corrupt_record_error."""
    return self.engine_input.corrupt_record_error(error, data_config)


@contextlib.contextmanager
def local_input_positions(checkpoint: str) -> Iterator[str]:
  """Yields the checkpoint path to restore the position from: `checkpoint` itself where
  it is local, otherwise its name in a local folder holding a copy of its input
  positions (the engines' inputs read local files)."""
  if not file_systems.is_remote(checkpoint):
    yield checkpoint
    return
  local_dir = tempfile.mkdtemp()
  try:
    for path in files.glob(glob.escape(portable.input_prefix(checkpoint)) + "*"):
      files.copy(path, os.path.join(local_dir, os.path.basename(path)))
    yield os.path.join(local_dir, os.path.basename(checkpoint))
  finally:
    shutil.rmtree(local_dir)
