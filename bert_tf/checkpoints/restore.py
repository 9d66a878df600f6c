"""Restoring a model's checkpoint items by object, from either checkpoint format.

A checkpoint's root children are the model's `checkpoint_items` by name (`encoder`,
`masked_lm`, `next_sentence`, heads), plus `optimizer`, `step`, `random_state` and
the input position for trainer checkpoints. Two formats hold them:
  - portable checkpoints (`ckpt-N.h5`, bert_tf.checkpoints.portable), which the trainer and
    the converter write on every engine; reading them needs no TensorFlow;
  - TensorFlow checkpoints (`ckpt-N.index`, bert_tf.checkpoints.tf_checkpoints), written
    by older versions of the converter and of the trainer; on Keras backends other than
    TensorFlow they are read by walking their object graph.

A directory resolves to its newest checkpoint that reads in full (the higher step where
it holds both formats): a damaged one (a file cut short by a kill during a write, a
lost shard, an array that fails its checksum) is skipped with a warning that names it,
its bad file (or array) and the checkpoint used instead. A portable file named itself
is checked as it is restored: one that fails is an error naming it.
"""

import logging
import os
import re
from typing import Callable, Dict, Mapping, Optional, Sequence

from bert_tf.checkpoints import portable
from bert_tf.checkpoints import portable_restore
from bert_tf.checkpoints import readable
from bert_tf.utils import errors
from bert_tf.utils import files
from bert_tf.utils import optional


class CheckpointItemsError(errors.UserError, KeyError):
  """A checkpoint (or model) lacks an item asked for, e.g. an --init_checkpoint without the
  encoder."""

  def __str__(self):
    return str(self.args[0])  # KeyError would quote it.


def step_in_name(prefix: str) -> int:
  """N of a prefix named ...-N or a portable file ...-N.h5 (-1 without one)."""
  if prefix.endswith(portable.SUFFIX):
    prefix = prefix[:-len(portable.SUFFIX)]
  tail = prefix.rsplit("-", 1)[-1]
  return int(tail) if tail.isdigit() else -1


def newest_readable_portable(directory: str, names: Optional[Sequence[str]] = None,
                             check: Callable[[str], None] = portable.check_readable
                             ) -> Optional[str]:
  """The newest portable checkpoint in `directory` (`names`: its listing, where the
  caller has it) that reads in full with valid checksums (`check`: what reads it), or
  None; damaged newer ones are skipped with a warning, as for TensorFlow checkpoints."""
  return readable.newest_readable(directory, portable.checkpoints_in(directory, names),
                                   check)


class CheckpointSizeError(errors.UserError, ValueError):
  """A checkpoint's encoder differs in size from the model's (layers, hidden size,
  vocab); the message names both."""


def _encoder_size(shapes: Mapping[str, Sequence[int]]) -> Dict[str, int]:
  """{"layers", "hidden size", "vocab"} from {variable name: shape} of an encoder (any
  naming that keeps `word_embeddings` and `query` kernels in its names)."""
  size = {"layers": sum(1 for name in shapes if re.search(r"query/_?kernel", name))}
  for name, shape in shapes.items():
    if "word_embeddings" in name and "scale" not in name and len(shape) == 2:
      size.update({"hidden size": int(shape[1]), "vocab": int(shape[0])})
  return size


def encoder_size_difference(prefix: str, encoder) -> str:
  """How the encoder in the checkpoint at `prefix` differs in size from `encoder` ("2
  layers, hidden size 128 in the checkpoint; 12 layers, hidden size 768 in the model"),
  or "" when it does not."""
  theirs = _encoder_size(_stored_encoder_shapes(prefix))
  ours = _encoder_size({v.path: tuple(v.shape) for v in encoder.variables})
  keys = [k for k in ("layers", "hidden size", "vocab") if theirs.get(k) != ours.get(k)]
  if not keys:
    return ""
  def show(size):
    return ", ".join(f"{size.get(k)} {k}" if k == "layers" else f"{k} {size.get(k)}"
                     for k in keys)
  return f"{show(theirs)} in the checkpoint; {show(ours)} in the model"


def _stored_encoder_shapes(prefix: str) -> Dict[str, Sequence[int]]:
  """{variable name: shape} of the encoder item of the checkpoint at `prefix` ({}
  without one)."""
  if portable.is_portable(prefix):
    return portable.item_shapes(prefix, "encoder")
  return _tf_format().item_shapes(prefix, "encoder")


def checkpoint_vocab_size(path: str) -> Optional[int]:
  """The rows of the word-embedding table of the encoder in the checkpoint at `path` (a
  directory: its newest readable checkpoint), or None where it holds no encoder.

  Raises:
    FileNotFoundError or readable.UnreadableCheckpointError: as resolve_checkpoint.
  """
  return _encoder_size(_stored_encoder_shapes(resolve_checkpoint(path))).get("vocab")


def _tf_format():
  """bert_tf.checkpoints.tf_checkpoints (imports TensorFlow)."""
  from bert_tf.checkpoints import tf_checkpoints  # pylint: disable=g-import-not-at-top
  return tf_checkpoints


def _tensorflow_installed() -> bool:
  try:
    import tensorflow  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    return False
  return True


def _has_legacy_index(names: Sequence[str]) -> bool:
  """Whether a directory listing `names` holds TensorFlow checkpoints."""
  return any(name.endswith(".index") or name == "checkpoint" for name in names)


def resolve_checkpoint(path: str) -> str:
  """Returns a checkpoint prefix (or portable checkpoint file) from a prefix, a
  portable file or a directory (its newest readable checkpoint of either kind; the
  higher step where it holds both).

  Raises:
    FileNotFoundError: naming `path` when it holds no checkpoint.
    readable.UnreadableCheckpointError: the directory's checkpoints are all damaged.
  """
  if portable.is_portable(path):
    return path
  is_directory = files.isdir(path)
  # Listed once: a remote directory answers one listing, not one per question.
  names = files.listdir(path) if is_directory else []
  if path.endswith(portable.SUFFIX) and not is_directory and files.exists(path):
    portable.check_readable(path)  # Raises, naming the file and what fails.
  if is_directory and not (_has_legacy_index(names) and _tensorflow_installed()):
    found = newest_readable_portable(path, names)
    if found is None:
      raise errors.MissingInputError(f"No checkpoint in directory {path}: "
                                     + found_instead(names))
    return found
  if not _tensorflow_installed():
    if not files.exists(path) and not files.exists(path + ".index"):
      where = "file or folder" if files.is_local(path) else "bucket or folder"
      raise errors.MissingInputError(f"No checkpoint at {path}: no such {where}"
                                     + _numbered_hint(path))
    raise errors.MissingInputError(
        f"No portable checkpoint at {path} (a file ckpt-N.h5, or a directory holding "
        "one); reading a TensorFlow checkpoint needs tensorflow" + _numbered_hint(path))
  tf_format = _tf_format()
  if is_directory or tf_format.is_directory(path):
    found, problems = [], []
    for find in (tf_format.newest_readable_checkpoint, newest_readable_portable):
      try:
        prefix = find(path)
      except readable.UnreadableCheckpointError as e:
        problems.append(e)
        continue
      if prefix is not None:
        found.append(prefix)
    if not found and problems:
      raise problems[0]
    if not found:
      raise errors.MissingInputError(f"No checkpoint in directory {path}: "
                                     + found_instead(names or files.listdir(path)))
    return max(found, key=step_in_name)
  if not tf_format.exists(path):
    raise errors.MissingInputError(f"No checkpoint at {path} (expected {path}.index)"
                                   + _numbered_hint(path))
  return path


def found_instead(names: Sequence[str], limit: int = 5) -> str:
  """What a folder that holds no checkpoint this install reads holds instead, from its
  listing `names`: its TensorFlow checkpoint files and what reading them needs, or the
  first `limit` names, or that it is empty."""
  indexes = sorted(name for name in names if name.endswith(".index"))
  if indexes and not _tensorflow_installed():
    return (f"found TensorFlow checkpoint files {', '.join(indexes[:limit])}; reading "
            f"them needs tensorflow ({optional.TENSORFLOW_INSTALL}), or convert the "
            "folder once where TensorFlow is installed (bert-tf-convert-checkpoint "
            "--input=FOLDER --output_dir=NEW_FOLDER writes a ckpt-N.h5 that every "
            "engine reads)")
  if not names:
    return "it is empty"
  shown = sorted(names)
  more = f" and {len(shown) - limit} more" if len(shown) > limit else ""
  return f"found {', '.join(shown[:limit])}{more} (no ckpt-N.h5 and no ckpt-N.index)"


def _numbered_hint(path: str) -> str:
  """Where `path` is the name its folder's checkpoints share without their step
  (`run/ckpt` beside `run/ckpt-1.index`): a hint naming the folder and the newest of
  them; otherwise ""."""
  folder, stem = os.path.split(path)
  if not stem or not files.isdir(folder or "."):
    return ""
  numbered = re.compile(re.escape(stem) + r"-(\d+)(\.index|" + re.escape(portable.SUFFIX) + ")$")
  found = sorted((int(m.group(1)), m.group(2))
                 for m in map(numbered.match, files.listdir(folder or ".")) if m)
  if not found:
    return ""
  step, suffix = found[-1]
  newest = (f"the file {os.path.join(folder, f'{stem}-{step}{suffix}')}"
            if suffix == portable.SUFFIX else
            f"the prefix {os.path.join(folder, f'{stem}-{step}')}")
  steps = sorted({n for n, _ in found})
  return (f"; {folder or '.'} holds {', '.join(f'{stem}-{n}' for n in steps)}: pass the "
          f"folder {folder or '.'} (its newest checkpoint) or {newest}")


def checkpoint_children(prefix: str) -> set:
  """Names of the root children of the checkpoint at `prefix`."""
  if portable.is_portable(prefix):
    return portable.item_names(prefix)
  return _tf_format().children(prefix)


def restore_items(path: str, checkpoint_items: Mapping[str, object],
                  items: Sequence[str] = ("encoder",)) -> Dict[str, str]:
  """Restores the named `checkpoint_items` by object from a checkpoint.

  Args:
    path: a checkpoint prefix or portable file, or a directory whose latest checkpoint
      is used.
    checkpoint_items: the model's {name: trackable}, e.g. model.checkpoint_items.
    items: the names to restore.

  Returns:
    {item: checkpoint prefix} for every restored item.

  Raises:
    FileNotFoundError: no checkpoint at `path`.
    CheckpointItemsError: an item the model or the checkpoint lacks (the message names
      both sets).
    AssertionError or PortableCheckpointError: a variable of a restored item has no
      value in the checkpoint, or one of another shape.
  """
  prefix = resolve_checkpoint(path)
  try:
    return _restore_items(prefix, checkpoint_items, items)
  except (AssertionError, ValueError) as e:
    if "encoder" in items and "encoder" in checkpoint_items:
      differs = encoder_size_difference(prefix, checkpoint_items["encoder"])
      if differs:
        raise CheckpointSizeError(f"Checkpoint {prefix} holds an encoder of another size "
                                  f"than the model's: {differs}. Set model.encoder to the "
                                  "checkpoint's size.") from e
    raise


def _restore_items(prefix: str, checkpoint_items: Mapping[str, object],
                   items: Sequence[str]) -> Dict[str, str]:
  if portable.is_portable(prefix):
    restored = portable_restore.restore_items(prefix, checkpoint_items, items)
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
  return _tf_format().restore_items(prefix, checkpoint_items, items)
