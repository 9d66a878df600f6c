"""tf.io.gfile as the package's file system where TensorFlow is installed
(bert_tf.utils.file_systems chooses it): the operations the package asks of every file
system, with a rename of remote folders that keeps the order a reader waits on."""

import os
from typing import Iterator, List


class TensorFlowFiles:
  """tf.io.gfile, with the errors it raises, for local paths or (`remote`) those of
  another file system."""

  def __init__(self, gfile, remote: bool):
    self._gfile = gfile
    self._remote = remote
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    self.failures = (OSError, tf.errors.OpError)
    self.missing = (FileNotFoundError, tf.errors.NotFoundError)

  # Whether a file and a folder of one name stand apart (files.file_system): an
  # atomic write asks gfile whether a folder stands where it renames a file to.
  names_apart = False

  def listdir(self, directory: str) -> List[str]:
    """The names in `directory`; [] where it is no directory."""
    return self._gfile.listdir(directory) if self._gfile.isdir(directory) else []

  def read_bytes(self, path: str) -> bytes:
    with self._gfile.GFile(path, "rb") as f:
      return f.read()

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
    if not self._remote or not self._gfile.isdir(source):
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
