"""Which file system serves a path: the one choice every reader and writer of the package
goes through (bert_tf.utils.files holds the operations built on it).

Where TensorFlow is installed, every path goes through `tf.io.gfile` (local, `gs://`,
`s3://` with tensorflow-io, `ram://`, ...). Where it is not (the JAX engine's machines),
local paths use the os module and remote ones (`gs://`, `s3://`, `memory://`, ...) use
fsspec, the library the JAX ecosystem's loaders and TensorBoard's own writer fall back
on without TensorFlow; its cloud protocols come as packages of their own (gcsfs,
requirements/gcs.txt; s3fs, requirements/s3.txt; beside TensorFlow the extras
`bert_tf[gcs]` and `bert_tf[s3]`). A gs:// path on a Cloud Storage emulator
(STORAGE_EMULATOR_HOST set) goes through fsspec with TensorFlow too: TensorFlow's client
has no setting that reaches one. A path that no installed library serves, or whose
storage does not answer, is a `StorageError` naming the path and what is missing: the
install that fits this environment (bert_tf.utils.optional.extra_install).
"""

import contextlib
import glob as glob_lib
import inspect
import os
import shutil
import threading
import time
from typing import Iterator, List, Optional

from bert_tf import cpu_kernels
from bert_tf.utils import client_logs
from bert_tf.utils import errors
from bert_tf.utils import optional

# The package, and the extra, that bring each remote protocol to the fsspec route.
_EXTRAS = {"gs": ("gcsfs", "gcs"), "gcs": ("gcsfs", "gcs"), "s3": ("s3fs", "s3"),
           "s3a": ("s3fs", "s3")}


class StorageError(errors.UserError, OSError):
  """A path on storage that no installed library serves, or that does not answer."""


def protocol(path: str) -> str:
  """The protocol of a URL-like path (`gs` of `gs://b/x`); "" for a local path."""
  head, sep, _ = str(path).partition("://")
  return head if sep and head and head != "file" else ""


def is_remote(path: str) -> bool:
  """Whether `path` names a file system other than the local one (a `file://` URL is
  local)."""
  return bool(protocol(path))


class LocalFiles:
  """The part of tf.io.gfile the package uses, on the local file system."""

  glob = staticmethod(glob_lib.glob)
  isdir = staticmethod(os.path.isdir)
  exists = staticmethod(os.path.exists)
  remove = staticmethod(os.remove)
  rmtree = staticmethod(shutil.rmtree)
  listdir = staticmethod(os.listdir)
  GFile = staticmethod(open)  # pylint: disable=invalid-name
  failures = (OSError,)
  missing = (FileNotFoundError,)  # what opening an absent file raises

  @staticmethod
  def makedirs(directory: str) -> None:
    os.makedirs(directory, exist_ok=True)

  @staticmethod
  def rename(source: str, target: str, overwrite: bool = False) -> None:
    if not overwrite and os.path.exists(target):
      raise FileExistsError(target)
    os.replace(source, target)

  @staticmethod
  def copy(source: str, target: str, overwrite: bool = False) -> None:
    if not overwrite and os.path.exists(target):
      raise FileExistsError(target)
    shutil.copyfile(source, target)


class FsspecFiles:
  """The same operations on one fsspec file system (paths keep their protocol); within
  `answer_within`, each call is bounded by its deadline."""

  def __init__(self, fs, prefix: str, object_store: bool):
    self._unbounded_fs = fs
    self._prefix = prefix
    self._object_store = object_store
    self.failures = (OSError, ValueError, RuntimeError)
    self.missing = (FileNotFoundError,)

  @property
  def _fs(self):
    return _within_deadline(self._unbounded_fs)

  def _full(self, name: str) -> str:
    return name if "://" in name else self._prefix + name.lstrip("/")

  def glob(self, pattern: str) -> List[str]:
    return [self._full(name) for name in self._fs.glob(pattern)]

  def isdir(self, path: str) -> bool:
    return self._fs.isdir(path)

  def exists(self, path: str) -> bool:
    return self._fs.exists(path)

  def listdir(self, path: str) -> List[str]:
    return [os.path.basename(name.rstrip("/"))
            for name in self._fs.ls(path, detail=False)]

  def size(self, path: str) -> int:
    return self._fs.size(path)

  def size_and_version(self, path: str):
    """(size in bytes, a version that changes when the file is replaced: the object's
    generation or etag, else its modification time; "" where the store has none)."""
    info = self._fs.info(path)
    version = next((info[key] for key in ("generation", "etag", "ETag", "mtime", "updated",
                                          "LastModified", "created") if info.get(key)), "")
    return int(info["size"]), str(version)

  def makedirs(self, directory: str) -> None:
    if self._object_store:
      # Directories are names in an object store: this only checks that the bucket
      # exists (fsspec's makedirs would create a missing bucket).
      if not self._fs.exists(directory):
        try:
          self._fs.mkdir(directory, create_parents=False)
        except FileNotFoundError:
          # fsspec names only the bucket.
          bucket = directory.split("://", 1)[-1].split("/", 1)[0]
          raise FileNotFoundError(f"the bucket {bucket} does not exist") from None
      return
    self._fs.makedirs(directory, exist_ok=True)

  def remove(self, path: str) -> None:
    self._fs.rm(path)

  def rmtree(self, path: str) -> None:
    self._fs.rm(path, recursive=True)

  def GFile(self, path: str, mode: str = "r"):  # pylint: disable=invalid-name
    return self._fs.open(path, mode)

  def open_ranges(self, path: str):
    # No read-ahead: the caller reads whole blocks and caches them itself.
    return self._fs.open(path, "rb", cache_type="none")

  def read_ranges(self, path: str, ranges) -> Iterator[bytes]:
    """The bytes of each range [start, stop) of the file at `path`, in order: one
    request each, sharing no file object (threads may read ranges at once)."""
    for start, stop in ranges:
      yield self._fs.cat_file(path, start=start, end=stop)

  def copy(self, source: str, target: str, overwrite: bool = False) -> None:
    """Copies within this file system, or between it and the local one."""
    if not is_remote(target):
      if not overwrite and os.path.exists(target):
        raise FileExistsError(target)
      self._fs.get(source, target)
      return
    if not overwrite and self._fs.exists(target):
      raise FileExistsError(target)
    if not is_remote(source):
      self._fs.put(source, target)
    else:
      self._fs.copy(source, target, recursive=self._fs.isdir(source))

  def rename(self, source: str, target: str, overwrite: bool = False) -> None:
    # A server-side copy, then the delete: object stores have no rename (and the
    # object at `target` appears whole), and gcsfs's moveTo is answered by its
    # retries where a server lacks it.
    recursive = self._fs.isdir(source)
    if not overwrite and self._fs.exists(target):
      raise FileExistsError(target)
    self._fs.copy(source, target, recursive=recursive)
    self._fs.rm(source, recursive=recursive)


def _tensorflow_gfile():
  """tf.io.gfile, or None where TensorFlow is not installed. Imported on first use:
  modules that only name files load without TensorFlow; in a tool, without its start-up
  lines (cpu_kernels.import_tensorflow_quietly), however early a path is asked about."""
  if not optional.installed("tensorflow"):  # a blocked import (None) counts as absent
    return None
  try:
    cpu_kernels.import_tensorflow_quietly()  # once: an imported TensorFlow is kept
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  return tf.io.gfile


class _TensorFlowFiles:
  """tf.io.gfile, with the errors it raises."""

  def __init__(self, gfile):
    self._gfile = gfile
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    self.failures = (OSError, tf.errors.OpError)
    self.missing = (FileNotFoundError, tf.errors.NotFoundError)

  def size(self, path: str) -> int:
    return self._gfile.stat(path).length

  def size_and_version(self, path: str):
    """(size in bytes, modification time; "" where the file system keeps none)."""
    stat = self._gfile.stat(path)
    return stat.length, str(stat.mtime_nsec or "")

  def open_ranges(self, path: str):
    return self._gfile.GFile(path, "rb")

  def read_ranges(self, path: str, ranges) -> Iterator[bytes]:
    """The bytes of each range [start, stop) of the file at `path`, in order, through
    one file of its own: consecutive ranges are served by the client's read-ahead
    (TensorFlow's gs:// client fetches a block beyond a small read) where it has one."""
    with self._gfile.GFile(path, "rb") as f:
      for start, stop in ranges:
        f.seek(start)
        yield f.read(stop - start)

  def rename(self, source: str, target: str, overwrite: bool = False) -> None:
    """gfile.rename; a remote directory is copied file by file, then deleted (a remote
    file system renames a directory's entry, or each object, at best: ram:// leaves its
    files behind). The files of subdirectories are copied before those at the top, so
    that a reader that waits for a top-level file (a SavedModel's saved_model.pb) finds
    the rest in place."""
    if not is_remote(source) or not self._gfile.isdir(source):
      self._gfile.rename(source, target, overwrite=overwrite)
      return
    if not overwrite and self._gfile.exists(target):
      raise FileExistsError(target)
    copies = []
    for directory, _, names in self._gfile.walk(source):
      relative = directory[len(source):].strip("/")
      self._gfile.makedirs(os.path.join(target, relative))
      copies += [(relative, name) for name in names]
    for relative, name in sorted(copies, key=lambda copy: not copy[0]):
      self._gfile.copy(os.path.join(source, relative, name),
                       os.path.join(target, relative, name), overwrite=True)
    self._gfile.rmtree(source)

  def __getattr__(self, name):
    return getattr(self._gfile, name)


def _fsspec_files(path: str) -> FsspecFiles:
  scheme = protocol(path)
  package, extra = _EXTRAS.get(scheme, (None, None))
  install = (f"{package}: {optional.extra_install(extra)}" if extra
             else "an fsspec implementation of it")
  if scheme in ("gs", "gcs") and os.environ.get("STORAGE_EMULATOR_HOST"):
    # An emulator has no storage-control API: without this gcsfs probes each bucket's
    # type over gRPC for a minute before it falls back to the JSON API.
    os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
  try:
    import fsspec  # pylint: disable=g-import-not-at-top
    fs = fsspec.filesystem(scheme)
  except ImportError as e:
    raise StorageError(f"{path}: {scheme}:// paths without TensorFlow need {install} "
                       f"({e})") from None
  except ValueError:
    raise StorageError(f"{path}: no installed file system serves {scheme}:// paths "
                       f"(without TensorFlow: {install})") from None
  return FsspecFiles(fs, f"{scheme}://", object_store=scheme in _EXTRAS)


def _emulated(path: str) -> bool:
  """Whether `path` is on a Cloud Storage emulator (STORAGE_EMULATOR_HOST), which
  gcsfs reaches and TensorFlow's gs:// client, with no such setting, does not."""
  return protocol(path) in ("gs", "gcs") and bool(os.environ.get("STORAGE_EMULATOR_HOST"))


def for_path(path: str):
  """The file system of `path`: tf.io.gfile where TensorFlow is installed; without it
  the os module for a local path, fsspec for a remote one; fsspec also for a gs:// path
  on an emulator (STORAGE_EMULATOR_HOST set), which TensorFlow's client cannot reach.

  Returns:
    an object with tf.io.gfile's `exists`, `isdir`, `glob`, `listdir`, `makedirs`,
    `remove`, `rmtree`, `rename`, `copy` and `GFile`, `failures` (the exception
    types its storage raises) and `missing` (those of a file that is absent); for a remote path also `size` (bytes),
    `size_and_version` (bytes and a version that changes when the file is replaced),
    `open_ranges` (a binary file to seek and read whole ranges of, without read-ahead
    where the library has a choice) and `read_ranges` (the bytes of several ranges, in
    order, on a file object of their own): local files are sized and read with the os
    module.

  Raises:
    StorageError: a remote protocol that no installed library serves, naming the path
      and the extra to install.
  """
  gfile = _tensorflow_gfile()
  if gfile is not None and not _emulated(path):
    return _TensorFlowFiles(gfile)
  if not is_remote(path):
    return LocalFiles
  return _fsspec_files(path)


def gcs_with_preconditions(path: str):
  """gcsfs's file system for a gs:// `path` where gcsfs is installed (with TensorFlow
  too), for writes on a condition on the object's generation (created only where none
  exists: `pipe_file(..., mode="create")`; the JSON API's `ifGenerationMatch` through
  its `call`); None for other paths or without gcsfs."""
  if protocol(path) not in ("gs", "gcs"):
    return None
  try:
    import gcsfs  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    return None
  return _fsspec_files(path)._unbounded_fs  # pylint: disable=protected-access


# Where the remote calls of this thread must have been answered (answer_within).
_DEADLINE = threading.local()
# How long the storage calls of one output (a checkpoint, a summary upload) may take in
# all, their retries included, before the writer gives up.
WRITE_BOUND_S = 60.0


@contextlib.contextmanager
def answer_within(seconds: float) -> Iterator[None]:
  """Bounds the remote calls of the block (on this thread, fsspec route) to `seconds` in
  all: each is retried with backoff by its library (gcsfs: 6 tries, 1 to 16 s apart)
  until the deadline, then raises TimeoutError ("no answer within N s (last error:
  ...)", the last failure the client logged) where it has not failed with its own error
  before. The client's logs of failed requests are not printed: the caller reports the
  failure in one line. A deadline already set (an enclosing block) stays where it is
  earlier."""
  outer = getattr(_DEADLINE, "at", None)
  at = time.monotonic() + seconds
  _DEADLINE.at = at if outer is None else min(outer, at)
  _DEADLINE.seconds = seconds if outer is None else _DEADLINE.seconds
  client_logs.LAST_FAILURE.listen()
  try:
    yield
  finally:
    _DEADLINE.at = outer
    client_logs.LAST_FAILURE.stop()


class _BoundedCalls:
  """An fsspec asynchronous file system whose blocking calls pass the time left to the
  deadline as fsspec's `timeout`."""

  def __init__(self, fs, at: float, seconds: float):
    self._fs, self._at, self._seconds = fs, at, seconds

  def __getattr__(self, name):
    method = getattr(self._fs, name)
    # fsspec's blocking twin of a coroutine `_NAME` takes `timeout`; others (open) do not.
    if not inspect.iscoroutinefunction(getattr(self._fs, f"_{name}", None)):
      return method

    def bounded(*args, **kwargs):
      from fsspec import exceptions  # pylint: disable=g-import-not-at-top
      left = self._at - time.monotonic()
      try:
        if left <= 0:
          raise exceptions.FSTimeoutError()
        return method(*args, timeout=left, **kwargs)
      except exceptions.FSTimeoutError:
        failure = client_logs.LAST_FAILURE.text
        last = f" (last error: {failure})" if failure else ""
        raise TimeoutError(f"no answer within {self._seconds:.0f} s{last}") from None
    return bounded


def _within_deadline(fs):
  """`fs`, its calls bounded by this thread's deadline (answer_within) where one is set
  and fsspec can bound them (an asynchronous file system: gcsfs, s3fs)."""
  at: Optional[float] = getattr(_DEADLINE, "at", None)
  if at is None:
    return fs
  from fsspec import asyn  # pylint: disable=g-import-not-at-top
  if not isinstance(fs, asyn.AsyncFileSystem):
    return fs
  return _BoundedCalls(fs, at, _DEADLINE.seconds)


def failure_reason(error: BaseException) -> str:
  """One line saying why a storage call failed (TensorFlow, fsspec or os errors)."""
  reason = (getattr(error, "message", None) or str(error)
            or getattr(error, "strerror", None) or type(error).__name__)
  return " ".join(str(reason).split())
