"""The trainer's checkpoint saving and resuming (restoring a model's items by object is
bert_tf.checkpoints.restore)."""

import os
import shutil
from typing import Optional

import tensorflow as tf


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

  def restore_latest(self) -> Optional[str]:
    """Restores the latest checkpoint in model_dir, if any; returns its prefix."""
    prefix = self.latest()
    if prefix is None:
      return None
    self.checkpoint.restore(prefix).assert_existing_objects_matched()
    return prefix

  def save(self) -> str:
    """Writes a checkpoint numbered by the current step; returns its prefix."""
    step = int(self.step.numpy())
    path = self.manager.save(checkpoint_number=step)
    if not self.is_chief:
      shutil.rmtree(self.directory, ignore_errors=True)
      return os.path.join(self.model_dir, os.path.basename(path))
    return path
