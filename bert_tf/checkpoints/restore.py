"""Restoring a model's checkpoint items by object.

Every checkpoint bert_tf writes is a tf.train.Checkpoint whose root children are the
model's `checkpoint_items` by name (`encoder`, `masked_lm`, `next_sentence`, heads),
plus `optimizer`, `step` and `iterator` for trainer checkpoints.
"""

import logging
from typing import Dict, Mapping, Sequence

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
