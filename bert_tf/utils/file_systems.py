"""Which file system serves a path of each protocol, and the file systems themselves:
the one choice under bert_tf.utils.files, which names paths (their protocol) and holds
the operations the package asks of them, composed of these file systems' primitives.

Where TensorFlow is installed, every path goes through `tf.io.gfile` (local, `gs://`,
`s3://` with tensorflow-io, `ram://`, ...). Where it is not (the JAX engine's machines),
local paths use the os module and remote ones (`gs://`, `s3://`, `memory://`, ...) use
fsspec, the library the JAX ecosystem's loaders and TensorBoard's own writer fall back
on without TensorFlow; its cloud protocols come as packages of their own (gcsfs,
requirements/gcs.txt; s3fs, requirements/s3.txt; beside TensorFlow the extras
`bert_tf[gcs]` and `bert_tf[s3]`). A gs:// path on a Cloud Storage emulator
(STORAGE_EMULATOR_HOST set) goes through fsspec with TensorFlow too: TensorFlow's client
has no setting that reaches one. (tf.io.gfile's route is
bert_tf.utils.tensorflow_files.) A path that no installed library serves, or whose
storage does not answer, is a `StorageError` naming the path and what is missing: the
install that fits this environment (bert_tf.utils.optional.extra_install).
"""

import contextlib
import glob as glob_lib
import os
import shutil
from typing import Iterator, List

from bert_tf import cpu_kernels
from bert_tf.utils import errors
from bert_tf.utils import optional
from bert_tf.utils import storage_deadline
from bert_tf.utils import tensorflow_files

# The package, and the extra, that bring each remote protocol to the fsspec route.
_EXTRAS = {"gs": ("gcsfs", "gcs"), "gcs": ("gcsfs", "gcs"), "s3": ("s3fs", "s3"),
           "s3a": ("s3fs", "s3")}


class StorageError(errors.UserError, OSError):
  """A path on storage that no installed library serves, or that does not answer."""


class LocalFiles:
  """The part of tf.io.gfile the package uses, on the local file system."""

  glob = staticmethod(glob_lib.glob)
  isdir = staticmethod(os.path.isdir)
  exists = staticmethod(os.path.exists)
  remove = staticmethod(os.remove)
  rmtree = staticmethod(shutil.rmtree)
  GFile = staticmethod(open)  # pylint: disable=invalid-name
  failures = (OSError,)
  missing = (FileNotFoundError,)  # what opening an absent file raises
  # A file and a folder of one name exclude each other: a rename over one replaces it.
  names_apart = False

  @staticmethod
  def listdir(directory: str) -> List[str]:
    """The names in `directory`; [] where it is no directory."""
    try:
      return os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
      return []

  @staticmethod
  def read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
      return f.read()

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
  `answer_within`, each call is bounded by its deadline.

  On an object store (gs://, s3://) a question about one path (exists, isdir, size)
  costs a request for the object and a listing of the names under it; the operations
  below ask none where the answer is known otherwise: a listing is all a listing
  costs, a file is read, copied, renamed and uploaded by its name alone.
  """

  def __init__(self, fs, prefix: str, object_store: bool):
    self._unbounded_fs = fs
    self._prefix = prefix
    self._object_store = object_store
    self.failures = (OSError, ValueError, RuntimeError)
    self.missing = (FileNotFoundError,)
    # On an object store a file `x` and the folder `x/` (the objects named under it)
    # are apart: writing the one leaves the other.
    self.names_apart = object_store

  @property
  def _fs(self):
    return storage_deadline.within_deadline(self._unbounded_fs)

  def _full(self, name: str) -> str:
    return name if "://" in name else self._prefix + name.lstrip("/")

  def _serves(self, path: str) -> bool:
    """Whether `path` is on this file system (not a local one)."""
    return str(path).startswith(self._prefix)

  def glob(self, pattern: str) -> List[str]:
    return [self._full(name) for name in self._fs.glob(pattern)]

  def isdir(self, path: str) -> bool:
    return self._fs.isdir(path)

  def exists(self, path: str) -> bool:
    return self._fs.exists(path)

  def listdir(self, path: str) -> List[str]:
    """The names in the folder `path`; [] where it is no folder: one listing."""
    try:
      entries = self._fs.ls(path, detail=True)
    except FileNotFoundError:
      return []
    if (len(entries) == 1 and entries[0]["type"] != "directory"
        and entries[0]["name"].strip("/") == path.split("://", 1)[-1].strip("/")):
      return []  # the file `path` itself
    return [os.path.basename(entry["name"].rstrip("/")) for entry in entries]

  def read_bytes(self, path: str) -> bytes:
    """The whole file at `path`: one request."""
    return self._fs.cat_file(path)

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
      # exists (one request; fsspec's makedirs would create a missing bucket).
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
    if not self._serves(target):
      if not overwrite and os.path.exists(target):
        raise FileExistsError(target)
      self._fs.get(source, target)
      return
    if not overwrite and self._fs.exists(target):
      raise FileExistsError(target)
    if not self._serves(source):
      if os.path.isfile(source):
        self._fs.put_file(source, target)  # by name: no question about `target`
      else:
        self._fs.put(source, target, recursive=True)
    else:
      self._fs.copy(source, target, recursive=self._fs.isdir(source))

  def rename(self, source: str, target: str, overwrite: bool = False) -> None:
    # A server-side copy, then the delete: object stores have no rename (and the
    # object at `target` appears whole), and gcsfs's moveTo is answered by its
    # retries where a server lacks it.
    if self._object_store and self._renamed_file(source, target, overwrite):
      return
    recursive = self._fs.isdir(source)
    if not overwrite and self._fs.exists(target):
      raise FileExistsError(target)
    self._fs.copy(source, target, recursive=recursive)
    try:
      self._fs.rm(source, recursive=recursive)
    except self.failures:
      # `target` is whole once copied: a source that storage lost after the copy stays
      # behind under its (temporary) name, for the writer's own clean-up.
      pass

  def _renamed_file(self, source: str, target: str, overwrite: bool) -> bool:
    """Renames the object `source` by its name alone (no listing); False where no
    object has that name (a folder)."""
    if not overwrite and self._fs.exists(target):
      raise FileExistsError(target)
    try:
      self._fs.cp_file(source, target)
    except FileNotFoundError:
      return False
    with contextlib.suppress(*self.failures):  # `target` is whole: as in `rename`
      self._fs.rm_file(source)
    return True


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


def _fsspec_files(scheme: str, path: str) -> FsspecFiles:
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


def _emulated(scheme: str) -> bool:
  """Whether paths of `scheme` are on a Cloud Storage emulator (STORAGE_EMULATOR_HOST),
  which gcsfs reaches and TensorFlow's gs:// client, with no such setting, does not."""
  return scheme in ("gs", "gcs") and bool(os.environ.get("STORAGE_EMULATOR_HOST"))


def for_protocol(scheme: str, path: str):
  """The file system of `path`, whose protocol is `scheme` ("" for a local path;
  bert_tf.utils.files.protocol): tf.io.gfile where TensorFlow is installed; without it
  the os module for a local path, fsspec for a remote one; fsspec also for a gs:// path
  on an emulator (STORAGE_EMULATOR_HOST set), which TensorFlow's client cannot reach.

  Returns:
    an object with tf.io.gfile's `exists`, `isdir`, `glob`, `makedirs`, `remove`,
    `rmtree`, `rename`, `copy` and `GFile`; `listdir` ([] where the folder is not),
    `read_bytes` (a whole file), `failures` (the exception types its storage raises),
    `missing` (those of a file that is absent) and `names_apart` (whether a file and a
    folder of one name stand apart, as on object stores); for a remote path also `size` (bytes),
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
  if gfile is not None and not _emulated(scheme):
    return tensorflow_files.TensorFlowFiles(gfile, remote=bool(scheme))
  if not scheme:
    return LocalFiles
  return _fsspec_files(scheme, path)


def gcs_with_preconditions(scheme: str):
  """gcsfs's file system for the paths of protocol `scheme` where they are gs:// and
  gcsfs is installed (with TensorFlow too), for writes on a condition on the object's
  generation (created only where none exists: `pipe_file(..., mode="create")`; the JSON
  API's `ifGenerationMatch` through its `call`); None for other paths or without
  gcsfs."""
  if scheme not in ("gs", "gcs"):
    return None
  try:
    import gcsfs  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    return None
  return _fsspec_files(scheme, f"{scheme}://")._unbounded_fs  # pylint: disable=protected-access
