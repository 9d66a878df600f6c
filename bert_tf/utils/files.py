"""File patterns and atomic outputs, for every reader and writer of the package.

Inputs are named by comma-separated globs (`data/train-*.tfrecord,extra.tfrecord`);
outputs are written under a temporary name in the same directory and renamed when
complete, so that a reader never sees a half-written file and a failed run leaves
whatever was there before untouched. Paths may be local or on any `tf.io.gfile` file
system.
"""

import contextlib
import glob as glob_lib
import os
import shutil
import sys
import uuid
from typing import Iterable, Iterator, List, Sequence, Union

from bert_tf.utils import errors


class _LocalFiles:
  """The part of tf.io.gfile this module uses, on the local file system (where
  TensorFlow is not installed: the JAX engine's machines)."""

  glob = staticmethod(glob_lib.glob)
  isdir = staticmethod(os.path.isdir)
  exists = staticmethod(os.path.exists)
  remove = staticmethod(os.remove)
  rmtree = staticmethod(shutil.rmtree)
  GFile = staticmethod(open)  # pylint: disable=invalid-name

  @staticmethod
  def makedirs(directory: str) -> None:
    os.makedirs(directory, exist_ok=True)

  @staticmethod
  def rename(source: str, target: str, overwrite: bool = False) -> None:
    if not overwrite and os.path.exists(target):
      raise FileExistsError(target)
    os.replace(source, target)


def _gfile():
  """tf.io.gfile (local and remote file systems), or the local file system where
  TensorFlow is not installed. Imported on first use: modules that only name files
  load without TensorFlow."""
  try:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
  except ImportError:
    return _LocalFiles
  return tf.io.gfile


def exists(path: str) -> bool:
  """Whether a file or folder exists (local, or remote where TensorFlow is installed)."""
  return _gfile().exists(path)


def read_bytes(path: str) -> bytes:
  """A whole file's bytes (local, or remote where TensorFlow is installed)."""
  with _gfile().GFile(path, "rb") as f:
    return f.read()


def expand_patterns(patterns: Union[str, Sequence[str]], field: str = "input_path",
                    error: type = errors.MissingInputError) -> List[str]:
  """The files that comma-separated globs name.

  Args:
    patterns: a string of comma-separated globs, or a list of such strings.
    field: the setting or flag the patterns came from, for error messages.
    error: the UserError class raised when nothing matches (a reader's own).

  Returns:
    The matching files (directories left out): each glob's matches sorted, the
    globs in the order given, each file once.

  Raises:
    `error` (by default MissingInputError, a FileNotFoundError): naming `field` and the
      glob, when a glob matches nothing or no glob is given.
  """
  if isinstance(patterns, str):
    patterns = [patterns]
  globs = [g.strip() for p in patterns for g in (p or "").split(",") if g.strip()]
  if not globs:
    raise error(f"{field}: no input file given")
  gfile = _gfile()
  glob_files, isdir = gfile.glob, gfile.isdir
  if gfile is _LocalFiles:
    glob_files = _local_glob(field)
  files, seen = [], set()
  for glob in globs:
    matches = sorted(glob_files(glob))
    if not matches:
      raise error(f"{field}: no file matches {glob}")
    for path in matches:
      if path not in seen and not isdir(path):
        seen.add(path)
        files.append(path)
  if not files:
    raise error(f"{field}: {', '.join(globs)} match only directories")
  return files


def _local_glob(field: str):
  def glob_files(pattern: str) -> List[str]:
    if "://" in pattern:
      raise errors.MissingInputError(f"{field}: {pattern} is not on the local file system; "
                                     "reading it needs TensorFlow (tf.io.gfile)")
    return glob_lib.glob(pattern)
  return glob_files


def exists(path: str) -> bool:
  """Whether `path` exists (any `tf.io.gfile` file system; the local one where
  TensorFlow is not installed)."""
  return _gfile().exists(path)


def read_bytes(path: str) -> bytes:
  """The whole content of the file at `path` (file systems as `exists`)."""
  with _gfile().GFile(path, "rb") as f:
    return f.read()


def make_dirs(directory: str) -> None:
  """Creates `directory` and its parents (any `tf.io.gfile` file system; the local one
  where TensorFlow is not installed).

  Raises:
    OutputPathError: naming the directory and why it cannot be made: a file in the
      way (named), no permission, a read-only file system.
  """
  gfile = _gfile()
  failures = (OSError,) if gfile is _LocalFiles else (
      OSError, sys.modules["tensorflow"].errors.OpError)
  exists, isdir = gfile.exists, gfile.isdir
  try:
    gfile.makedirs(directory)
  except failures as e:
    reason = getattr(e, "strerror", None) or getattr(e, "message", None) or str(e)
    blocking = directory
    while blocking and not exists(blocking):
      parent = os.path.dirname(blocking)
      blocking = parent if parent != blocking else ""
    if blocking and not isdir(blocking):
      reason = f"{blocking} is a file, not a directory"
    raise errors.OutputPathError(f"Cannot create the output directory {directory}: "
                                 f"{reason}") from None


def temporary_name(path: str) -> str:
  """A unique sibling of `path` to write to before the rename."""
  return f"{path}.tmp-{uuid.uuid4().hex[:12]}"


@contextlib.contextmanager
def atomic_path(path: str, overwrite: bool = True) -> Iterator[str]:
  """Yields a temporary path to write a file or directory to; renames it to `path`.

  On success the temporary file or directory becomes `path` (replacing an existing
  file or directory when `overwrite`); on any exception it is removed and `path` is left as it was.
  The parent directory is created.

  Raises:
    FileExistsError: `path` exists and `overwrite` is False.
  """
  gfile = _gfile()
  parent = os.path.dirname(path)
  if parent:
    make_dirs(parent)
  if not overwrite and gfile.exists(path):
    raise errors.OutputExistsError(f"{path} exists already")
  tmp = temporary_name(path)
  try:
    yield tmp
    if overwrite and gfile.isdir(path):
      # A directory cannot be renamed over; the old one is moved aside first.
      old = temporary_name(path)
      gfile.rename(path, old)
      gfile.rename(tmp, path)
      gfile.rmtree(old)
    else:
      gfile.rename(tmp, path, overwrite=overwrite)
  finally:
    if gfile.exists(tmp):
      if gfile.isdir(tmp):
        gfile.rmtree(tmp)
      else:
        gfile.remove(tmp)


@contextlib.contextmanager
def atomic_open(path: str, mode: str = "w", overwrite: bool = True):
  """Opens a temporary file for writing (`mode` "w" or "wb"); see `atomic_path`."""
  if mode not in ("w", "wb"):
    raise ValueError(f"atomic_open writes with mode 'w' or 'wb', got '{mode}'")
  with atomic_path(path, overwrite) as tmp:
    with _gfile().GFile(tmp, mode) as f:
      yield f


def write_lines(path: str, lines: Iterable[str]) -> str:
  """Writes each line plus a newline, atomically; returns `path`."""
  with atomic_open(path, "w") as f:
    for line in lines:
      f.write(line + "\n")
  return path
