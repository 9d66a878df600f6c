"""Saving and resuming a trainer's portable checkpoints (bert_tf.checkpoints.portable):
every N steps, the last K kept, as the TensorFlow trainer's CheckpointSaver does.

The weights, optimizer, step and random state go into `ckpt-N.h5` (written by the
first process); each process's tf.data iterator into a TensorFlow checkpoint
`ckpt-N.input[-P]` beside it, written first, so that a `ckpt-N.h5` on disk comes with
its iterators.
"""

import logging
import os
from typing import Callable, Mapping, Optional, Sequence

import tensorflow as tf

from bert_tf.checkpoints import portable
from bert_tf.checkpoints import restore


class PortableSaver:
  """Writes and finds the portable checkpoints of one model_dir.

  Args:
    model_dir: where the checkpoints go.
    max_to_keep: how many of the newest checkpoints are kept.
    process_index: this process (0 writes the .h5 files and deletes old ones).
    barrier: called where every process must have arrived (after the iterators are
      written, before the .h5); None for one process.
  """

  def __init__(self, model_dir: str, max_to_keep: int, process_index: int = 0,
               barrier: Optional[Callable[[str], None]] = None):
    self.model_dir = model_dir
    self.max_to_keep = max_to_keep
    self.process_index = process_index
    self._barrier = barrier or (lambda name: None)

  def latest(self) -> Optional[str]:
    """The newest readable portable checkpoint in model_dir, or None."""
    return restore.newest_readable_portable(self.model_dir)

  def save(self, step: int, items: Mapping[str, object],
           optimizer_state: Mapping[str, object], random_state: Sequence, iterator=None,
           backend: str = "") -> str:
    """Writes the checkpoint of `step` (and this process's iterator); returns its path."""
    path = portable.path_for_step(self.model_dir, step)
    os.makedirs(self.model_dir, exist_ok=True)
    if iterator is not None:
      tf.train.Checkpoint(iterator=iterator).write(
          portable.input_prefix(path, self.process_index))
    self._barrier(f"iterators of step {step}")
    if self.process_index == 0:
      portable.save(path, items, optimizer_state, step=step, random_state=random_state,
                    backend=backend)
      self._delete_old()
    self._barrier(f"checkpoint of step {step}")
    return path

  def restore_iterator(self, path: str, iterator) -> bool:
    """Restores this process's input iterator saved with `path`; False when there is
    none or it belongs to another input pipeline (then the caller skips batches)."""
    prefix = portable.input_prefix(path, self.process_index)
    if not tf.io.gfile.exists(prefix + ".index"):
      return False
    try:
      status = tf.train.Checkpoint(iterator=iterator).read(prefix)
      status.assert_existing_objects_matched()
      status.expect_partial()
    except (AssertionError, ValueError, tf.errors.OpError) as e:
      logging.warning("Cannot restore the input iterator from %s (%s: %s)", prefix,
                      type(e).__name__, str(e).splitlines()[0])
      return False
    return True

  def _delete_old(self) -> None:
    for path in portable.checkpoints_in(self.model_dir)[self.max_to_keep:]:
      os.remove(path)
      for sidecar in tf.io.gfile.glob(portable.input_prefix(path) + "*"):
        tf.io.gfile.remove(sidecar)
