"""Where model_dir's run lock (bert_tf.training.run_lock) is kept, one store per kind of
storage, each taking, renewing, reading and giving back the lock record
(bert_tf.training.lock_record):

  - Local model_dir: the file is held with an exclusive `flock` for the run's lifetime,
    which the kernel gives back however the process ends (NFS carries it between
    hosts). A file that nobody holds is one whose process died: it is taken over with a
    line naming that process.
  - gs:// model_dir (gcsfs): the object is created only where none exists (GCS
    `ifGenerationMatch=0`); the holder renews its lease every LEASE_S / 4 s (its
    metadata, on the condition that the object is still the one it created). A lock
    whose lease ran out (a killed run on another machine), or whose process is gone
    from this host, is taken over: deleted on the condition that it is the stale one,
    then created again as above.
  - Other remote storage (tf.io.gfile, s3fs) has no such condition: the lock is written
    where none exists and read back, which leaves a window of one round trip between
    two runs started together.
"""

import errno
import json
import os
import time
from typing import Optional

from bert_tf.training import lock_record
from bert_tf.utils import errors
from bert_tf.utils import file_systems
from bert_tf.utils import storage_deadline
from bert_tf.utils import files

# How long one storage call of the lock may take, its retries included.
_CALL_S = 20.0


def _refusal(path: str, record: Optional[dict]) -> lock_record.ModelDirInUseError:
  """The refusal of a run whose lock file at `path` another run (`record`) holds."""
  return lock_record.ModelDirInUseError(
      lock_record.in_use_message(os.path.dirname(path), record))


def _read_file(path: str) -> Optional[dict]:
  try:
    return lock_record.parse(files.read_bytes(path))
  except (FileNotFoundError, errors.MissingInputError):
    return None


class _LocalLock:
  """A local lock file held with flock."""

  renews = False

  def __init__(self, path: str):
    self.path = files.local_path(path)
    self._fd: Optional[int] = None

  def take(self, record: dict) -> Optional[dict]:
    import fcntl  # pylint: disable=g-import-not-at-top
    # The os module's, not the file layer's: this loads no TensorFlow.
    os.makedirs(os.path.dirname(self.path), exist_ok=True)
    while True:
      fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
      try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except OSError as e:
        os.close(fd)
        if e.errno not in (errno.EAGAIN, errno.EACCES):
          raise
        raise _refusal(self.path, self.read())
      try:
        same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
      except FileNotFoundError:
        same = False
      if same:
        break
      # Its holder removed it between our open and our flock: a new file is needed.
      os.close(fd)
    with os.fdopen(os.dup(fd), "rb") as f:
      previous = lock_record.parse(f.read())
    os.ftruncate(fd, 0)
    try:
      os.pwrite(fd, json.dumps(record).encode("utf-8"), 0)
      os.fsync(fd)
    except OSError as e:
      if e.errno != errno.ENOSPC:
        raise
      # A full disk: the flock holds all the same, without the holder's name (the
      # trainer makes room before its first write).
    self._fd = fd
    return previous

  def read(self) -> Optional[dict]:
    try:
      with open(self.path, "rb") as f:
        return lock_record.parse(f.read())
    except FileNotFoundError:
      return None

  @staticmethod
  def why_stale(_: dict) -> str:
    return "that process is no longer running"

  def give_back(self) -> None:
    # Removed while still held: a run waiting on the old file finds it gone and opens
    # the new one.
    try:
      os.remove(self.path)
    finally:
      os.close(self._fd)
      self._fd = None


class _GcsLock:
  """A lock object on GCS through gcsfs, with generation preconditions."""

  renews = True

  def __init__(self, path: str, fs):
    self.path = path
    self._fs = fs
    self._bucket, self._key, _ = fs.split_path(path)
    self._generation: Optional[str] = None
    self._stale = ""

  def read(self) -> Optional[dict]:
    found = self._read()
    return found[0] if found else None

  def _read(self):
    """(content, metadata) of the lock object, or None."""
    self._fs.invalidate_cache(self.path)
    try:
      info = self._fs.info(self.path, timeout=_CALL_S)
      content = self._fs.cat_file(self.path, timeout=_CALL_S)
    except FileNotFoundError:
      return None
    return lock_record.parse(content) or {}, info

  def take(self, record: dict) -> Optional[dict]:
    previous = None
    for _ in range(3):
      try:
        self._fs.invalidate_cache(self.path)
        self._fs.pipe_file(self.path, json.dumps(record).encode("utf-8"), mode="create",
                           timeout=_CALL_S)
        self._fs.invalidate_cache(self.path)
        self._generation = str(self._fs.info(self.path, timeout=_CALL_S)["generation"])
        return previous
      except FileExistsError:
        pass
      found = self._read()
      if found is None:
        continue
      previous, info = found
      renewed = float((info.get("metadata") or {}).get("renewed", previous.get("started", 0)))
      self._stale = lock_record.stale_reason(previous, renewed)
      if self._stale is None:
        raise _refusal(self.path, previous)
      try:
        self._fs.call("DELETE", "b/{}/o/{}", self._bucket, self._key,
                      ifGenerationMatch=str(info["generation"]), timeout=_CALL_S)
      except (FileNotFoundError, FileExistsError):
        pass  # another run took it over first: the next round finds that one
    raise _refusal(self.path, (self._read() or ({}, None))[0])

  def why_stale(self, _: dict) -> str:
    return self._stale

  def renew(self) -> None:
    try:
      self._fs.call("PATCH", "b/{}/o/{}", self._bucket, self._key,
                    ifGenerationMatch=self._generation,
                    timeout=storage_deadline.call_bound(_CALL_S),
                    json={"metadata": {"renewed": str(lock_record.now())}})
    except (FileNotFoundError, FileExistsError):
      raise lock_record.ModelDirInUseError(
          f"{self.path} was taken over by another run while this one could not renew it: "
          "this run stops; "
          + lock_record.in_use_message(os.path.dirname(self.path), self.read()))

  def give_back(self) -> None:
    try:
      self._fs.call("DELETE", "b/{}/o/{}", self._bucket, self._key,
                    ifGenerationMatch=self._generation,
                    timeout=storage_deadline.call_bound(_CALL_S))
    except (FileNotFoundError, FileExistsError):
      pass  # taken over already


class _PlainLock:
  """A lock file on storage without preconditions: written where none exists, read back."""

  renews = True

  def __init__(self, path: str):
    self.path = path
    self._token = None
    self._stale = ""

  def read(self) -> Optional[dict]:
    return _read_file(self.path)

  def take(self, record: dict) -> Optional[dict]:
    previous = self.read()
    if previous is not None:
      self._stale = lock_record.stale_reason(
          previous, float(previous.get("renewed", previous.get("started", 0))))
      if self._stale is None:
        raise _refusal(self.path, previous)
    self._token = record["token"]
    self._record = dict(record, renewed=lock_record.now())
    files.write_lines(self.path, [json.dumps(self._record)])
    time.sleep(1.0)  # a run that started together has written its own by now
    found = self.read()
    if not found or found.get("token") != self._token:
      raise _refusal(self.path, found)
    return previous

  def why_stale(self, _: dict) -> str:
    return self._stale

  def renew(self) -> None:
    found = self.read()
    if found is not None and found.get("token") != self._token:
      raise lock_record.ModelDirInUseError(
          f"{self.path} was taken over by another run while this one could not renew it: "
          "this run stops; " + lock_record.in_use_message(os.path.dirname(self.path), found))
    self._record["renewed"] = lock_record.now()
    files.write_lines(self.path, [json.dumps(self._record)])

  def give_back(self) -> None:
    found = self.read()
    if found is None or found.get("token") == self._token:
      try:
        files.remove(self.path)
      except Exception:  # pylint: disable=broad-except
        pass


def store_for(path: str):
  """The store of the lock file at `path`, by its storage."""
  if files.is_local(path):
    return _LocalLock(path)
  fs = file_systems.gcs_with_preconditions(files.protocol(path))
  return _GcsLock(path, fs) if fs is not None else _PlainLock(path)
