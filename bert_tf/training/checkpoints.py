"""The trainer's checkpoint saving and resuming (restoring a model's items by object is
bert_tf.checkpoints.restore)."""

import logging
import os
import shutil
from typing import Mapping, Optional, Sequence

import tensorflow as tf

from bert_tf.checkpoints import restore

# Items a trainer checkpoint may lack without being wrong: checkpoints written before
# they were saved resume without them (see Trainer.initialize).
OPTIONAL_ITEMS = ("random_state", "iterator")


class CheckpointSaver:
  """Saves trainer checkpoints every N steps, keeps the last K, and resumes.

  Under MultiWorkerMirroredStrategy every worker saves (saving may involve collective
  ops), but only the chief writes into model_dir; other workers write to a scratch
  directory that is deleted after each save. Every worker restores from model_dir.
  """

  def __init__(self, checkpoint: tf.train.Checkpoint, model_dir: str, max_to_keep: int,
               step: tf.Variable, is_chief: bool = True, worker_index: int = 0):
    self.checkpoint = checkpoint
    self.model_dir = model_dir
    self.is_chief = is_chief
    self.step = step
    if is_chief:
      self.directory = model_dir
    else:
      self.directory = os.path.join(model_dir, ".worker_scratch", f"worker_{worker_index}")
    self.manager = tf.train.CheckpointManager(checkpoint, self.directory,
                                              max_to_keep=max_to_keep, step_counter=step)

  def latest(self) -> Optional[str]:
    """The chief's latest checkpoint prefix in model_dir, or None."""
    return tf.train.latest_checkpoint(self.model_dir)

  def restore_latest(self, items: Mapping[str, object],
                     optional: Sequence[str] = OPTIONAL_ITEMS) -> Optional[str]:
    """Restores `items` from model_dir's newest readable checkpoint, if any.

    A damaged newer checkpoint is skipped with a warning naming it, its bad file and
    the one used (bert_tf.checkpoints.restore.newest_readable_checkpoint).

    Args:
      items: {name: trackable} to restore (the saved checkpoint's items, or some).
      optional: names in `items` that an older checkpoint may lack; they keep their
        current state, with a log line.

    Returns:
      the restored prefix, or None when model_dir holds no checkpoint.
    """
    prefix = restore.newest_readable_checkpoint(self.model_dir)
    if prefix is None:
      return None
    available = restore.checkpoint_children(prefix)
    absent = [name for name in optional if name in items and name not in available]
    if absent:
      logging.info("Checkpoint %s holds no %s (written by an older version)", prefix,
                   ", ".join(absent))
    present = {name: value for name, value in items.items() if name not in absent}
    status = tf.train.Checkpoint(**present).read(prefix)
    status.assert_existing_objects_matched()
    status.expect_partial()
    return prefix

  def save(self) -> str:
    """Writes a checkpoint numbered by the current step; returns its prefix."""
    step = int(self.step.numpy())
    path = self.manager.save(checkpoint_number=step)
    if not self.is_chief:
      shutil.rmtree(self.directory, ignore_errors=True)
      return os.path.join(self.model_dir, os.path.basename(path))
    return path
