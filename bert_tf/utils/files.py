"""File patterns and atomic outputs, for every reader and writer of the package.

Inputs are named by comma-separated globs (`data/train-*.tfrecord,extra.tfrecord`);
outputs are written under a temporary name in the same directory and renamed when
complete, so that a reader never sees a half-written file and a failed run leaves
whatever was there before untouched. Paths may be local or remote: this module tells
them apart (protocol), and every operation asks bert_tf.utils.file_systems once for the
file system that serves its path (tf.io.gfile where TensorFlow is installed, fsspec for
remote paths without it), then uses that file system's primitives. The package names
its paths to this module alone. A library that writes only local
files (h5py) writes to a local temporary file that `staged_output` then uploads, and
reads a local copy of a remote file (bert_tf.utils.range_reads.local_copy).
"""

import contextlib
import os
import shutil
import tempfile
import uuid
from typing import Iterable, Iterator, List, Sequence, Union

from bert_tf.utils import client_logs
from bert_tf.utils import errors
from bert_tf.utils import file_systems
from bert_tf.utils import storage_deadline


def protocol(path: str) -> str:
  """The protocol of a URL-like path (`gs` of `gs://b/x`); "" for a local path."""
  head, sep, _ = str(path).partition("://")
  return head if sep and head and head != "file" else ""


def is_remote(path: str) -> bool:
  """Whether `path` names a file system other than the local one (a `file://` URL is
  local)."""
  return bool(protocol(path))


def file_system(path: str):
  """The file system that serves `path` (file_systems.for_protocol): its primitives,
  for the operations here and bert_tf.utils.range_reads'.

  Raises:
    StorageError: a remote protocol that no installed library serves.
  """
  return file_systems.for_protocol(protocol(path), path)


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
  files, seen = [], set()
  for glob in globs:
    glob = local_path(glob)
    gfile = _storage_for(glob, field)
    try:
      with client_logs.quiet_retries():
        matches = sorted(gfile.glob(glob))
        found = [path for path in matches if path not in seen and not gfile.isdir(path)]
    except FileNotFoundError:
      # fsspec's answer for a bucket that does not exist.
      raise error(f"{field}: no file matches {glob} (no such bucket or folder)") from None
    except gfile.failures as e:
      raise file_systems.StorageError(
          f"{field}: cannot list {glob}: {storage_deadline.failure_reason(e)}") from None
    if not matches:
      raise error(f"{field}: no file matches {glob}")
    seen.update(found)
    files.extend(found)
  if not files:
    raise error(f"{field}: {', '.join(globs)} match only directories")
  return files


def _storage_for(path: str, field: str):
  """The file system of `path`, a StorageError naming `field` where none serves it."""
  try:
    return file_system(path)
  except file_systems.StorageError as e:
    raise file_systems.StorageError(f"{field}: {e}") from None


def exists(path: str) -> bool:
  """Whether `path` exists (on any file system bert_tf.utils.file_systems serves). A
  local path is asked of the os module: the check loads no TensorFlow (which would
  import Keras before a tool chose its backend)."""
  if is_local(path):
    return os.path.exists(local_path(path))
  return file_system(path).exists(path)


def isdir(path: str) -> bool:
  """Whether `path` is a directory."""
  return file_system(path).isdir(path)


def is_file(path: str) -> bool:
  """Whether `path` exists and is not a directory."""
  gfile = file_system(path)
  return gfile.exists(path) and not gfile.isdir(path)


def listdir(directory: str) -> List[str]:
  """The names in `directory` ([] where it does not exist): one listing on remote
  storage."""
  return [name.rstrip("/") for name in file_system(directory).listdir(directory)]


def glob(pattern: str) -> List[str]:
  """The paths that match `pattern`, sorted."""
  return sorted(file_system(pattern).glob(pattern))


def remove(path: str) -> None:
  """Deletes the file at `path`."""
  file_system(path).remove(path)


def copy(source: str, target: str) -> None:
  """Copies the file `source` to `target` (replacing it), either or both remote."""
  remote = target if is_remote(target) else source
  file_system(remote).copy(source, target, overwrite=True)


def open_file(path: str, mode: str = "r"):
  """The file at `path`, opened for reading (`r`, `rb`); writers use `atomic_open`."""
  return file_system(path).GFile(path, mode)


def is_local(path: str) -> bool:
  """Whether `path` is on the local file system (a plain path or a `file://` URL)."""
  return not is_remote(path)


def local_path(path: str) -> str:
  """A local path as the os module takes it (`file:///x` is `/x`)."""
  path = str(path)
  return path[len("file://"):] if path.startswith("file://") else path


def open_input(path: str):
  """Opens an input file for binary reading: a local one with `open` (the fast path), a
  remote one through the package's file system (tf.io.gfile with TensorFlow, fsspec
  without it)."""
  if is_local(path):
    return open(local_path(path), "rb")
  return open_file(path, "rb")


def size(path: str) -> int:
  """The size in bytes of the file at `path`."""
  if is_local(path):
    return os.path.getsize(local_path(path))
  return file_system(path).size(path)


def absolute_path(path: str) -> str:
  """A local path made absolute; a remote one (gs://, ...) as it is."""
  return path if is_remote(path) else os.path.abspath(
      local_path(path))


def read_bytes(path: str) -> bytes:
  """The whole content of the file at `path`: a local one with `open` (which loads no
  TensorFlow), a remote one in one request where the library reads by name alone.

  Raises:
    FileNotFoundError: there is no file at `path` (on every file system; tf.io.gfile
      raises its own NotFoundError).
  """
  if is_local(path):
    with open(local_path(path), "rb") as f:
      return f.read()
  storage = file_system(path)
  try:
    return storage.read_bytes(path)
  except FileNotFoundError:
    raise
  except storage.missing as e:
    raise FileNotFoundError(f"{path}: no such file") from e


def check_writable(directory: str, field: str = "model_dir") -> None:
  """Checks that remote storage serves `directory` and takes writes there: writes and
  deletes a small file in it, within one write's bound in all (WRITE_BOUND_S). Run before
  anything else is read or written there, so that storage that is not served or does not
  answer is one error and no partial output. A local directory is left alone (creating
  it is `make_dirs`'s, with its own errors).

  Raises:
    StorageError: naming `field`, the directory and why (the extra to install, the
      host that did not answer, no permission).
  """
  if not is_remote(directory):
    return
  gfile = _storage_for(directory, field)
  probe = os.path.join(directory, f".write-check-{uuid.uuid4().hex[:12]}")
  try:
    # Its three calls answer within one write's bound in all, as a checkpoint's do.
    with client_logs.quiet_retries(), storage_deadline.answer_within(
        storage_deadline.WRITE_BOUND_S):
      gfile.makedirs(directory)
      with gfile.GFile(probe, "wb") as f:
        f.write(b"bert_tf")
      gfile.remove(probe)
  except gfile.failures as e:
    raise file_systems.StorageError(
        f"{field}: cannot write to {directory}: {storage_deadline.failure_reason(e)}") from None


def check_readable(path: str, field: str) -> None:
  """Checks that remote storage serves `path` and answers (asks whether it exists), so
  that a run whose input, checkpoint or vocab is on storage that is not served or does
  not answer stops with one error before it writes anything. A local path is left alone
  (its readers name a missing file), as is a remote one that does not exist.

  Raises:
    StorageError: naming `field`, the path and why (the extra to install, the host
      that did not answer).
  """
  if is_local(path):
    return
  gfile = _storage_for(path, field)
  try:
    with client_logs.quiet_retries():
      gfile.exists(path)
  except gfile.failures as e:
    raise file_systems.StorageError(
        f"{field}: cannot read {path}: {storage_deadline.failure_reason(e)}") from None


@contextlib.contextmanager
def staged_input(path: str) -> Iterator[str]:
  """Yields a local path holding the file at `path`, for libraries that read only local
  files (safetensors, torch; TensorFlow's own file system, which does not reach every
  storage the package's does): `path` itself where it is local, else a temporary local
  copy of the same name (a SavedModel asset keeps it), deleted when the block ends."""
  if not is_remote(path):
    yield local_path(path)
    return
  directory = tempfile.mkdtemp(prefix="bert_tf_staged_")
  try:
    local = os.path.join(directory, os.path.basename(path))
    copy(path, local)
    yield local
  finally:
    shutil.rmtree(directory)


@contextlib.contextmanager
def staged_output(path: str) -> Iterator[str]:
  """Yields a local path to write one file to, for libraries that write only local files
  (h5py); it becomes `path` when the block completes (see `atomic_path`): for a remote
  `path` it is uploaded under a temporary name that is then renamed, so that `path`
  appears whole or not at all."""
  if not is_remote(path):
    with _atomic(path, overwrite=True, a_file=True) as temporary:
      yield temporary
    return
  handle, local = tempfile.mkstemp(suffix=os.path.basename(path))
  os.close(handle)
  try:
    yield local
    with _atomic(path, overwrite=True, a_file=True) as temporary:
      copy(local, temporary)
  finally:
    os.remove(local)


@contextlib.contextmanager
def staged_directory(path: str) -> Iterator[str]:
  """Yields a local directory to write a folder to, for writers of local files only
  (safetensors, h5py); it becomes `path` when the block completes (replacing a folder
  there; see `atomic_path`): for a remote `path` its files are uploaded under a
  temporary name that is then renamed."""
  if not is_remote(path):
    with atomic_path(path) as temporary:
      os.makedirs(temporary)
      yield temporary
    return
  local = tempfile.mkdtemp(prefix="bert_tf_staged_")
  try:
    yield local
    with atomic_path(path) as temporary:
      for directory, _, names in os.walk(local):
        relative = os.path.relpath(directory, local)
        target = temporary if relative == "." else os.path.join(temporary, relative)
        make_dirs(target)
        for name in names:
          copy(os.path.join(directory, name), os.path.join(target, name))
  finally:
    shutil.rmtree(local)


def make_dirs(directory: str) -> None:
  """Creates `directory` and its parents.

  Raises:
    OutputPathError: naming the directory and why it cannot be made: a file in the
      way (named), no permission, a read-only file system, storage that does not
      answer (the error names the host), a remote file system no installed library
      serves (StorageError, naming the extra to install).
  """
  gfile = file_system(directory)
  try:
    gfile.makedirs(directory)
  except gfile.failures as e:
    reason = storage_deadline.failure_reason(e)
    if not is_remote(directory):
      reason = _blocking_file(directory) or reason
    raise errors.OutputPathError(f"Cannot create the output directory {directory}: "
                                 f"{reason}") from None


def _blocking_file(directory: str) -> str:
  """"F is a file, not a directory" for the file F that stands where a parent of
  `directory` should be; "" where there is none."""
  blocking = directory
  while blocking and not os.path.exists(blocking):
    parent = os.path.dirname(blocking)
    blocking = parent if parent != blocking else ""
  if blocking and not os.path.isdir(blocking):
    return f"{blocking} is a file, not a directory"
  return ""


def temporary_name(path: str) -> str:
  """A unique hidden sibling of `path` to write to before the rename (`.NAME.tmp-ID`: no
  name that begins with `path`'s, which TensorFlow's ram:// file system would take for
  `path` itself)."""
  directory, name = os.path.split(path.rstrip("/") or path)
  return os.path.join(directory, f".{name}.tmp-{uuid.uuid4().hex[:12]}")


@contextlib.contextmanager
def atomic_path(path: str, overwrite: bool = True) -> Iterator[str]:
  """Yields a temporary path to write a file or directory to; renames it to `path`.

  On success the temporary file or directory becomes `path` (replacing an existing
  file or directory when `overwrite`); on any exception it is removed and `path` is left as it was.
  The parent directory is created.

  Raises:
    FileExistsError: `path` exists and `overwrite` is False.
  """
  with _atomic(path, overwrite, a_file=False) as tmp:
    yield tmp


@contextlib.contextmanager
def _atomic(path: str, overwrite: bool, a_file: bool) -> Iterator[str]:
  """atomic_path; `a_file`: the block writes a file, which on an object store stands
  apart from a folder of its name (no question whether one is there)."""
  gfile = file_system(path)
  parent = os.path.dirname(path)
  if parent:
    make_dirs(parent)
  if not overwrite and gfile.exists(path):
    raise errors.OutputExistsError(f"{path} exists already")
  tmp = temporary_name(path)
  renamed = False
  try:
    yield tmp
    if overwrite and not (a_file and gfile.names_apart) and gfile.isdir(path):
      # A directory cannot be renamed over; the old one is moved aside first.
      old = temporary_name(path)
      gfile.rename(path, old)
      gfile.rename(tmp, path)
      renamed = True
      gfile.rmtree(old)
    else:
      gfile.rename(tmp, path, overwrite=overwrite)
      renamed = True
  finally:
    # Once renamed, `path` is whole: storage lost now (a copy of it left under the
    # temporary name) neither fails the write nor spends the caller's time.
    if not renamed:
      with contextlib.suppress(*gfile.failures):  # the block's own error says why
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
  with _atomic(path, overwrite, a_file=True) as tmp:
    with file_system(path).GFile(tmp, mode) as f:
      yield f


def write_at(descriptor: int, data: memoryview, offset: int) -> None:
  """os.pwrite of all of `data` at `offset` of a local file: a short write is followed
  by one for the rest, which raises the reason (ENOSPC for a full disk)."""
  while data:
    written = os.pwrite(descriptor, data, offset)
    data, offset = data[written:], offset + written


def write_lines(path: str, lines: Iterable[str]) -> str:
  """Writes each line plus a newline, atomically; returns `path`."""
  with atomic_open(path, "w") as f:
    for line in lines:
      f.write(line + "\n")
  return path
