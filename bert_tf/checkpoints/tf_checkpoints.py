"""TensorFlow checkpoints (`ckpt-N.index`, `ckpt-N.data-*`): finding a directory's
newest readable one, checking that one reads in full, its root children, and restoring
a model's items from one by object. Imported where a TensorFlow checkpoint is met
(bert_tf.checkpoints.restore); the portable format needs none of it.
"""

import logging
from typing import Dict, List, Mapping, Optional, Sequence

import keras
import tensorflow as tf

from bert_tf.checkpoints import object_graph
from bert_tf.checkpoints import readable
from bert_tf.checkpoints import trackables

# What reading a damaged checkpoint raises: the C++ reader's errors, and IndexError or
# ValueError from the Python side of a truncated index or data file.
_READ_ERRORS = (tf.errors.OpError, IndexError, ValueError)


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
    raise readable.UnreadableCheckpointError(f"Checkpoint {prefix} is unreadable: {index} is missing")
  try:
    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()
  except _READ_ERRORS as e:
    raise readable.UnreadableCheckpointError(
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
    raise readable.UnreadableCheckpointError(
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
  return readable.newest_readable(directory, checkpoint_candidates(directory), check_readable)


def exists(prefix: str) -> bool:
  return tf.io.gfile.exists(prefix + ".index")


def is_directory(path: str) -> bool:
  return tf.io.gfile.isdir(path)


def children(prefix: str) -> set:
  """Names of the root children of the TensorFlow checkpoint at `prefix`."""
  reader = tf.train.load_checkpoint(prefix)
  names = set()
  for key in reader.get_variable_to_shape_map():
    first = key.split("/", 1)[0]
    if first not in ("_CHECKPOINTABLE_OBJECT_GRAPH", "save_counter"):
      names.add(first)
  return names


def item_shapes(prefix: str, item: str) -> Dict[str, List[int]]:
  """{checkpoint key: shape} of the variables under root child `item`."""
  shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
  return {key: shape for key, shape in shapes.items() if key.startswith(item + "/")}


def restore_items(prefix: str, checkpoint_items: Mapping[str, object],
                  items: Sequence[str]) -> Dict[str, str]:
  """Restores the named items (already checked to exist on both sides) from the
  TensorFlow checkpoint at `prefix`; see restore.restore_items."""
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
