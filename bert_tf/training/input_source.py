"""The training input as the Trainer sees it: its position, the resume, the position
each checkpoint holds and the corrupt-record error, written once for both engines.

Both engines read the rows in one order (bert_tf.data.records.record_order), in which a
position is one number: the global batches read. Each checkpoint holds it in its
`input` group (bert_tf.checkpoints.portable), with what the order needs to mean the
same rows (its global batch size, shuffle window and seed: POSITION); the order's
epoch and offset are that number of rows divided by the rows of one pass. A resume, on
either engine and under any process count, seeks there in O(1) (an engine's `skip`
reads no consumed batch). Checkpoints of an earlier version kept the position beside
the .h5 in the writing engine's own format (`ckpt-N.input[-P]...`: a tf.data iterator
checkpoint, or JSON): the engine that wrote it still reads it. A checkpoint without a
position of this input (another order, a damaged or missing file of an earlier
version, another engine's file) resumes by skipping the consumed batches, with a line
saying why: with the same files, seed and order, the very batches an uninterrupted run
would read next.
"""

import abc
import contextlib
import glob
import os
import shutil
import tempfile
from typing import Callable, Dict, Iterator, Mapping, Optional

from bert_tf import configs
from bert_tf.checkpoints import portable
from bert_tf.data.records import record_order
from bert_tf.utils import errors
from bert_tf.utils import files

# The names of a position in a checkpoint's `input` group: the global batches read, and
# the order they are batches of.
BATCHES_READ = "batches_read"
POSITION = (BATCHES_READ, "global_batch_size", "shuffle_window", "seed")


class EngineInput(abc.ABC):
  """What an engine's training input does for the InputSource (the engine's steps read
  its batches). Every member but `corrupt_record_error` concerns the position only."""

  @abc.abstractmethod
  def restore(self, checkpoint: str, process_index: int) -> bool:
    """Starts at the position of process `process_index` that an earlier version saved
    beside the local `checkpoint` in this engine's format; False, logging why where
    one was saved but cannot be read or does not fit, if there is none of this input
    (never raises for a damaged file)."""

  @abc.abstractmethod
  def skip(self, steps: int) -> None:
    """Starts after the batches of `steps` global steps, reading none of them."""

  @abc.abstractmethod
  def corrupt_record_error(self, error: Exception, data_config: configs.DataConfig
                           ) -> Optional[Exception]:
    """The error to report when `error`, raised while reading `data_config` (training
    or evaluation), means a corrupt input record or one holding a token id beyond the
    model's vocab (naming the file and offset where it can), else None."""


def order_of(experiment: configs.ExperimentConfig) -> Dict[str, int]:
  """What a position of the training input is a position in: {global_batch_size,
  shuffle_window, seed} of the record order its settings give (seed 0 unshuffled)."""
  data_config = experiment.train_data
  window = record_order.settings(data_config)["shuffle_window"]
  window = window if window > 1 else 0
  return {"global_batch_size": data_config.global_batch_size, "shuffle_window": window,
          "seed": experiment.runtime.seed % 2**64 if window else 0}


class InputSource:
  """The training input of one Trainer, over its engine's input.

  Args:
    engine_input: the engine's EngineInput.
    process_index: this process's number, which names its position file of an
      earlier version.
    log_fn: receives each console line.
    order: the record order's settings a position is taken in (`order_of`).

  Attributes:
    saved_position: the position the restored checkpoint holds ({name: int} of
      POSITION), set by its restore; None without one.
  """

  def __init__(self, engine_input: EngineInput, process_index: int,
               log_fn: Callable[[str], None], order: Mapping[str, int]):
    self.engine_input = engine_input
    self.process_index = process_index
    self._log = log_fn
    self.order = dict(order)
    self.saved_position: Optional[Dict[str, int]] = None
    self.started = False
    self._start = (0, 0)  # (the step, the global batches read) where the input started

  def start(self, step: int, checkpoint: Optional[str], restore_position: bool = True
            ) -> None:
    """Positions the input at global step `step`: at the position `checkpoint` holds
    (or an earlier version saved beside it) where it is one of this input (and
    restore_position), else after skipping the `step` consumed batches, with a line
    saying why."""
    batches, why = None, f"No input position of this input saved with {checkpoint}"
    if checkpoint is not None and restore_position:
      if self.saved_position is not None:
        differs = [f"{key} {self.saved_position[key]} (now {value})"
                   for key, value in self.order.items()
                   if self.saved_position.get(key, value) != value]
        if differs:
          why = (f"The input position of {checkpoint} was taken with "
                 f"{', '.join(differs)}")
        else:
          batches = self.saved_position[BATCHES_READ]
      elif self._restore_earlier_version(checkpoint):
        self._start, self.started = (step, step), True
        return
    if batches is None:
      batches = step
      if step:
        self._log(f"{why}: skipped the {step} consumed batches")
    if batches:
      self.engine_input.skip(batches)
    self._start, self.started = (step, batches), True

  def _restore_earlier_version(self, checkpoint: str) -> bool:
    """Whether the position an earlier version saved beside `checkpoint` was restored
    (False, with a line, where it cannot be read)."""
    try:
      with local_input_positions(checkpoint) as local:
        return self.engine_input.restore(local, self.process_index)
    except (OSError, ValueError, errors.UserError) as e:
      self._log(f"Cannot read the input position saved with {checkpoint} "
                f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
      return False

  def position(self, step: int) -> Optional[Dict[str, int]]:
    """{name: int} of POSITION at global step `step` (None before the input
    started)."""
    if not self.started:
      return None
    start_step, start_batches = self._start
    return dict(self.order, **{BATCHES_READ: start_batches + step - start_step})

  def corrupt_record_error(self, error: Exception, data_config: configs.DataConfig
                           ) -> Optional[Exception]:
    """See EngineInput.corrupt_record_error."""
    return self.engine_input.corrupt_record_error(error, data_config)


@contextlib.contextmanager
def local_input_positions(checkpoint: str) -> Iterator[str]:
  """Yields the checkpoint path to restore a position of an earlier version from:
  `checkpoint` itself where it is local, otherwise its name in a local folder holding a
  copy of its input positions (the engines' inputs read local files)."""
  if files.is_local(checkpoint):
    yield checkpoint
    return
  local_dir = tempfile.mkdtemp()
  try:
    for path in files.glob(glob.escape(portable.input_prefix(checkpoint)) + "*"):
      files.copy(path, os.path.join(local_dir, os.path.basename(path)))
    yield os.path.join(local_dir, os.path.basename(checkpoint))
  finally:
    shutil.rmtree(local_dir)
