"""Restoring a model's checkpoint items by object.

Every checkpoint bert_tf writes is a tf.train.Checkpoint whose root children are the
model's `checkpoint_items` by name (`encoder`, `masked_lm`, `next_sentence`, heads),
plus `optimizer`, `step`, `random_state` and `iterator` for trainer checkpoints.

A directory resolves to its newest checkpoint that reads in full: a damaged one (a
file cut short by a kill during a write, a lost shard) is skipped with a warning that
names it, its bad file and the checkpoint used instead.

Portable checkpoints (`ckpt-N.h5`, bert_tf.checkpoints.portable, written by the trainer
of any Keras backend) are read the same way: a path may be one, and a directory's
newest checkpoint, TensorFlow's or portable (the higher step), is used. On Keras
backends other than TensorFlow, TensorFlow checkpoints are read by walking their object
graph (bert_tf.checkpoints.object_graph).
"""

import logging
from typing import Dict, List, Mapping, Optional, Sequence

import keras
import tensorflow as tf

from bert_tf.checkpoints import object_graph
from bert_tf.checkpoints import portable
from bert_tf.checkpoints import trackables
from bert_tf.utils import errors

# What reading a damaged checkpoint raises: the C++ reader's errors, and IndexError or
# ValueError from the Python side of a truncated index or data file.
_READ_ERRORS = (tf.errors.OpError, IndexError, ValueError)


class UnreadableCheckpointError(errors.UserError, OSError):
  """A checkpoint's index or data file cannot be read; the message names the file."""


class CheckpointItemsError(errors.UserError, KeyError):
  """A checkpoint (or model) lacks an item asked for, e.g. an --init_checkpoint without the
  encoder."""

  def __str__(self):
    return str(self.args[0])  # KeyError would quote it.


def checkpoint_candidates(directory: str) -> List[str]:
  """The prefixes the directory's `checkpoint` file lists, newest first."""
  state = tf.train.get_checkpoint_state(directory)
  if state is None:
    return []
  paths = list(state.all_model_checkpoint_paths)
  if state.model_checkpoint_path and state.model_checkpoint_path not in paths:
    paths.append(state.model_checkpoint_path)
  # get_checkpoint_state has already joined relative entries onto `directory` (so a moved
  # directory still works); joining again would break a relative `directory`.
  return list(reversed(paths))


def check_readable(prefix: str) -> None:
  """Reads the index and every tensor of the checkpoint at `prefix`.

  Raises:
    UnreadableCheckpointError: naming the checkpoint and the file that fails.
  """
  index = prefix + ".index"
  if not tf.io.gfile.exists(index):
    raise UnreadableCheckpointError(f"Checkpoint {prefix} is unreadable: {index} is missing")
  try:
    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()
  except _READ_ERRORS as e:
    raise UnreadableCheckpointError(
        f"Checkpoint {prefix} is unreadable: {index}: {type(e).__name__}: {e}") from None
  try:
    for key, dtype in dtypes.items():
      if dtype == tf.variant:
        # Iterator states: the reader cannot hand them to numpy, the restore op reads them.
        tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=[key], shape_and_slices=[""],
                             dtypes=[dtype])
      else:
        reader.get_tensor(key)
  except _READ_ERRORS as e:
    data_files = sorted(tf.io.gfile.glob(prefix + ".data-*")) or [prefix + ".data-*"]
    raise UnreadableCheckpointError(
        f"Checkpoint {prefix} is unreadable: {', '.join(data_files)} (reading {key}): "
        f"{type(e).__name__}: {e}") from None


def newest_readable_checkpoint(directory: str) -> Optional[str]:
  """The newest checkpoint in `directory` that reads in full, or None when it holds none.

  Every newer damaged checkpoint is skipped with a warning naming it, its bad file and
  the checkpoint used instead.

  Raises:
    UnreadableCheckpointError: the directory lists checkpoints but none reads (the
      message names each one's bad file).
  """
  return _newest_readable(directory, checkpoint_candidates(directory), check_readable)


def _newest_readable(directory: str, candidates, check) -> Optional[str]:
  """The first of `candidates` (newest first) that `check` reads, warning about each
  damaged one skipped."""
  problems = []
  for prefix in candidates:
    try:
      check(prefix)
    except (UnreadableCheckpointError, portable.PortableCheckpointError) as e:
      problems.append(str(e))
      continue
    for problem in problems:
      logging.warning("%s; using the newest readable checkpoint %s instead", problem, prefix)
    return prefix
  if problems:
    raise UnreadableCheckpointError("No readable checkpoint in " + directory + ": "
                                    + "; ".join(problems))
  return None


def _step_in_name(prefix: str) -> int:
  """N of a prefix named ...-N or a portable file ...-N.h5 (-1 without one)."""
  if prefix.endswith(portable.SUFFIX):
    prefix = prefix[:-len(portable.SUFFIX)]
  tail = prefix.rsplit("-", 1)[-1]
  return int(tail) if tail.isdigit() else -1


def newest_readable_portable(directory: str) -> Optional[str]:
  """The newest portable checkpoint in `directory` that reads in full, or None;
  damaged newer ones are skipped with a warning, as for TensorFlow checkpoints."""
  return _newest_readable(directory, portable.checkpoints_in(directory),
                          portable.check_readable)


def resolve_checkpoint(path: str) -> str:
  """Returns a checkpoint prefix (or portable checkpoint file) from a prefix, a
  portable file or a directory (its newest readable checkpoint of either kind, see
  `newest_readable_checkpoint`; the higher step where it holds both).

  Raises:
    FileNotFoundError: naming `path` when it holds no checkpoint.
    UnreadableCheckpointError: the directory's checkpoints are all damaged.
  """
  if tf.io.gfile.isdir(path):
    found, problems = [], []
    for find in (newest_readable_checkpoint, newest_readable_portable):
      try:
        prefix = find(path)
      except UnreadableCheckpointError as e:
        problems.append(e)
        continue
      if prefix is not None:
        found.append(prefix)
    if not found and problems:
      raise problems[0]
    if not found:
      raise errors.MissingInputError(f"No checkpoint in directory {path}")
    return max(found, key=_step_in_name)
  if portable.is_portable(path):
    return path
  if not tf.io.gfile.exists(path + ".index"):
    raise errors.MissingInputError(f"No checkpoint at {path} (expected {path}.index)")
  return path


def checkpoint_children(prefix: str) -> set:
  """Names of the root children of the checkpoint at `prefix`."""
  if portable.is_portable(prefix):
    return portable.item_names(prefix)
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
    CheckpointItemsError: an item the model or the checkpoint lacks (the message names
      both sets).
    AssertionError: a variable of a restored item has no value in the checkpoint.
  """
  prefix = resolve_checkpoint(path)
  if portable.is_portable(prefix):
    restored = portable.restore_items(prefix, checkpoint_items, items)
    for name in items:
      logging.info("Restored %s from %s", name, prefix)
    return restored
  missing_in_model = [name for name in items if name not in checkpoint_items]
  if missing_in_model:
    raise CheckpointItemsError(f"The model has no checkpoint item(s) {missing_in_model}; "
                               f"it has {sorted(checkpoint_items)}")
  available = checkpoint_children(prefix)
  missing_in_checkpoint = [name for name in items if name not in available]
  if missing_in_checkpoint:
    raise CheckpointItemsError(f"Checkpoint {prefix} has no item(s) {missing_in_checkpoint}; "
                               f"it has {sorted(available)}")
  for name in items:
    if not checkpoint_items[name].variables:
      raise ValueError(f"Checkpoint item '{name}' has no variables yet; build the model "
                       f"before restoring")
  if keras.backend.backend() != "tensorflow":
    # tf.train.Checkpoint restores TensorFlow trackables only.
    counts = object_graph.assign_items(prefix, {name: checkpoint_items[name] for name in items})
    for name in items:
      logging.info("Restored %s (%d variables) from %s", name, counts[name], prefix)
    return {name: prefix for name in items}
  checkpoint = tf.train.Checkpoint(**trackables.as_trackables(
      {name: checkpoint_items[name] for name in items}))
  try:
    status = checkpoint.read(prefix)
  except _READ_ERRORS:
    check_readable(prefix)  # Raises naming the damaged file.
    raise
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
