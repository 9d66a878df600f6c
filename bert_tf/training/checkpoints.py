"""Checkpoint restore by object, and the trainer's checkpoint saving.

Every checkpoint bert_tf writes is a tf.train.Checkpoint whose root children are the
model's `checkpoint_items` by name (`encoder`, `masked_lm`, `next_sentence`, heads),
plus `optimizer`, `step` and `iterator` for trainer checkpoints.
"""

import logging
import os
import shutil
from typing import Dict, Mapping, Optional, Sequence

import tensorflow as tf


def resolve_checkpoint(path: str) -> str:
  """Returns a checkpoint prefix from a prefix or a directory (its latest checkpoint).

  Raises:
    FileNotFoundError: naming `path` when it holds no checkpoint.
  """
  if tf.io.gfile.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest is None:
      raise FileNotFoundError(f"No checkpoint in directory {path}")
    return latest
  if not tf.io.gfile.exists(path + ".index"):
    raise FileNotFoundError(f"No checkpoint at {path} (expected {path}.index)")
  return path


def checkpoint_children(prefix: str) -> set:
  """Names of the root children of the checkpoint at `prefix`."""
  reader = tf.train.load_checkpoint(prefix)
  names = set()
  for key in reader.get_variable_to_shape_map():
    first = key.split("/", 1)[0]
    if first not in ("_CHECKPOINTABLE_OBJECT_GRAPH", "save_counter"):
      names.add(first)
  return names


def restore_items(path: str, checkpoint_items: Mapping[str, tf.Module],
                  items: Sequence[str] = ("encoder",)) -> Dict[str, str]:
  """Restores the named `checkpoint_items` by object from a checkpoint.

  Args:
    path: a checkpoint prefix, or a directory whose latest checkpoint is used.
    checkpoint_items: the model's {name: trackable}, e.g. model.checkpoint_items.
    items: the names to restore.

  Returns:
    {item: checkpoint prefix} for every restored item.

  Raises:
    FileNotFoundError: no checkpoint at `path`.
    KeyError: an item the model or the checkpoint lacks (the message names both sets).
    AssertionError: a variable of a restored item has no value in the checkpoint.
  """
  prefix = resolve_checkpoint(path)
  missing_in_model = [name for name in items if name not in checkpoint_items]
  if missing_in_model:
    raise KeyError(f"The model has no checkpoint item(s) {missing_in_model}; it has "
                   f"{sorted(checkpoint_items)}")
  available = checkpoint_children(prefix)
  missing_in_checkpoint = [name for name in items if name not in available]
  if missing_in_checkpoint:
    raise KeyError(f"Checkpoint {prefix} has no item(s) {missing_in_checkpoint}; it has "
                   f"{sorted(available)}")
  for name in items:
    if not checkpoint_items[name].variables:
      raise ValueError(f"Checkpoint item '{name}' has no variables yet; build the model "
                       f"before restoring")
  checkpoint = tf.train.Checkpoint(**{name: checkpoint_items[name] for name in items})
  status = checkpoint.read(prefix)
  try:
    status.assert_existing_objects_matched()
  except AssertionError as e:
    raise AssertionError(f"Checkpoint {prefix} does not cover every variable of "
                         f"{list(items)}: {e}") from None
  status.expect_partial()
  for name in items:
    logging.info("Restored %s (%d variables) from %s", name,
                 len(checkpoint_items[name].variables), prefix)
  return {name: prefix for name in items}


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
