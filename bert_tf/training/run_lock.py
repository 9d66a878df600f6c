"""One training run per model_dir: `model_dir/run.lock`, taken before the run writes
anything there and given back when it ends.

The lock names its holder (JSON: holder, host, pid, started, lease_s and the time of
its last renewal), so that a second run is refused in one line naming the first. Several
processes of one run (jax.distributed, MultiWorkerMirroredStrategy) share it: the chief
takes it for all (bert_tf.training.trainer asks every process whether it was refused).

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

import contextlib
import datetime
import errno
import json
import logging
import os
import socket
import sys
import threading
import time
import uuid
from typing import Callable, Iterator, Optional

from bert_tf.utils import client_logs
from bert_tf.utils import errors
from bert_tf.utils import file_systems
from bert_tf.utils import files

LOCK_FILE = "run.lock"
# How long a remote lock that is no longer renewed holds off another run.
LEASE_S = 60.0
# How long one storage call of the lock may take, its retries included.
_CALL_S = 20.0


class ModelDirInUseError(errors.UserError):
  """Another run holds the model_dir."""


def _now() -> float:
  return time.time()


def _time_text(seconds: float) -> str:
  return datetime.datetime.fromtimestamp(seconds).isoformat(sep=" ", timespec="seconds")


def _describe(record: dict) -> str:
  """"HOLDER pid P on host H since T" of a lock's content."""
  return (f"{record.get('holder', '?')} pid {record.get('pid', '?')} on host "
          f"{record.get('host', '?')} since {_time_text(float(record.get('started', 0)))}")


def in_use_message(model_dir: str, record: Optional[dict]) -> str:
  """The refusal of a run whose model_dir another run holds."""
  holder = _describe(record) if record else "another run"
  return (f"{model_dir} is in use by {holder} ({os.path.join(model_dir, LOCK_FILE)}): one "
          "run per model_dir; wait for it to end or use another model_dir")


def _process_gone(record: dict) -> bool:
  """Whether the lock's holder ran on this host and its process is gone."""
  if record.get("host") != socket.gethostname():
    return False
  try:
    os.kill(int(record.get("pid", 0)), 0)
  except ProcessLookupError:
    return True
  except (OSError, ValueError):
    return False
  return False


def _stale_reason(record: dict, renewed: float) -> Optional[str]:
  """Why a remote lock last renewed at `renewed` no longer holds (its process is gone
  from this host, or its lease ran out); None while it holds."""
  if _process_gone(record):
    return "that process is no longer running"
  lease = float(record.get("lease_s", LEASE_S))
  if _now() < renewed + lease:
    return None
  return f"its lease of {lease:.0f} s ran out {_now() - renewed - lease:.0f} s ago"


def _parse(content: bytes) -> Optional[dict]:
  try:
    record = json.loads(content.decode("utf-8"))
  except (UnicodeDecodeError, ValueError):
    return None
  return record if isinstance(record, dict) else None


class RunLock:
  """The lock of one model_dir, held by this process.

  Args:
    model_dir: the run's directory (local or remote).
    log_fn: receives the line of a takeover.
    lease_s: how long the lock holds without renewal (remote storage).
  """

  def __init__(self, model_dir: str, log_fn: Callable[[str], None] = logging.info,
               lease_s: float = LEASE_S):
    self.model_dir = model_dir
    self.path = os.path.join(model_dir, LOCK_FILE)
    self._log = log_fn
    self.lease_s = lease_s
    self.record = {"holder": os.path.basename(sys.argv[0] or "python") or "python",
                   "host": socket.gethostname(), "pid": os.getpid(),
                   "started": _now(), "lease_s": lease_s, "token": uuid.uuid4().hex}
    self._store = _store_for(self.path)
    self._held = False
    self._lost: Optional[str] = None
    self._stop = threading.Event()
    self._renewer: Optional[threading.Thread] = None
    # A local model_dir that the lock created, removed again with the lock where the run
    # wrote nothing else (a run refused by its checks leaves no folder behind).
    self._created_dir = files.is_local(model_dir) and not os.path.isdir(
        files.local_path(model_dir))

  def acquire(self) -> "RunLock":
    """Takes the lock (creating model_dir); returns self.

    Raises:
      ModelDirInUseError: another living run holds it (naming it).
    """
    previous = self._store.take(self.record)
    if previous is not None:
      self._log(f"Took over {self.path}, left by {_describe(previous)}: "
                f"{self._store.why_stale(previous)}")
    self._held = True
    if self._store.renews:
      self._renewer = threading.Thread(target=self._renew_while_held,
                                       name="model-dir-lock", daemon=True)
      self._renewer.start()
    return self

  def release(self) -> None:
    """Gives the lock back (removes the lock file)."""
    if not self._held:
      return
    self._stop.set()
    if self._renewer is not None:
      self._renewer.join()
    self._held = False
    if self._lost is not None:
      return
    try:
      with client_logs.quiet_retries():
        self._store.give_back()
      if self._created_dir:
        with contextlib.suppress(OSError):  # not empty: the run wrote into it
          os.rmdir(files.local_path(self.model_dir))
    except Exception as e:  # pylint: disable=broad-except
      # Storage lost: the run's own error says so; the lease runs out by itself.
      logging.warning("Could not remove %s (%s): another run takes it over once its "
                      "lease of %.0f s runs out", self.path,
                      file_systems.failure_reason(e), self.lease_s)

  def check(self) -> None:
    """Raises ModelDirInUseError where another run took the lock over (this one could
    not renew it within its lease)."""
    if self._lost is not None:
      raise ModelDirInUseError(self._lost)

  def _renew_while_held(self) -> None:
    while not self._stop.wait(self.lease_s / 4):
      try:
        with client_logs.quiet_retries():
          self._store.renew()
      except ModelDirInUseError as e:
        self._lost = str(e)
        return
      except Exception as e:  # pylint: disable=broad-except
        # Storage that does not answer now: the run's own writes report it.
        logging.debug("Renewing %s failed: %s", self.path, file_systems.failure_reason(e))

  def __enter__(self) -> "RunLock":
    return self.acquire()

  def __exit__(self, *exc) -> None:
    self.release()


class RunHold:
  """model_dir's lock held for all of a run's processes, re-entrantly: the chief takes
  it, every process learns through `any_process` (True where any process passes True)
  whether it was refused, and each raises ModelDirInUseError naming the holder then.
  `lock`: the chief's RunLock while held (None on the other processes and when not)."""

  def __init__(self, model_dir: str, is_chief: bool, any_process: Callable[[bool], bool],
               log_fn: Callable[[str], None]):
    self._model_dir, self._is_chief = model_dir, is_chief
    self._any_process, self._log = any_process, log_fn
    self._held, self.lock = False, None

  @contextlib.contextmanager
  def held(self) -> Iterator[None]:
    """Holds the lock for the block, unless it is held already (an outer block)."""
    if self._held:
      yield
      return
    refusal = None
    if self._is_chief:
      try:
        self.lock = RunLock(self._model_dir, self._log).acquire()
      except ModelDirInUseError as e:
        refusal = e
    try:
      if self._any_process(refusal is not None):
        raise refusal or ModelDirInUseError(
            in_use_message(self._model_dir, holder_of(self._model_dir)))
      self._held = True
      yield
    finally:
      self._held = False
      if self.lock is not None:
        self.lock.release()
        self.lock = None

  def check(self) -> None:
    """RunLock.check of the chief's lock (nothing elsewhere)."""
    if self.lock is not None:
      self.lock.check()


def holder_of(model_dir: str) -> Optional[dict]:
  """The content of model_dir's lock (None where there is none or it cannot be read)."""
  try:
    return _store_for(os.path.join(model_dir, LOCK_FILE)).read()
  except Exception:  # pylint: disable=broad-except
    return None


def _read_file(path: str) -> Optional[dict]:
  try:
    return _parse(files.read_bytes(path))
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
        raise ModelDirInUseError(in_use_message(os.path.dirname(self.path), self.read()))
      try:
        same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
      except FileNotFoundError:
        same = False
      if same:
        break
      # Its holder removed it between our open and our flock: a new file is needed.
      os.close(fd)
    with os.fdopen(os.dup(fd), "rb") as f:
      previous = _parse(f.read())
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
        return _parse(f.read())
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
    return _parse(content) or {}, info

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
      self._stale = _stale_reason(previous, renewed)
      if self._stale is None:
        raise ModelDirInUseError(in_use_message(os.path.dirname(self.path), previous))
      try:
        self._fs.call("DELETE", "b/{}/o/{}", self._bucket, self._key,
                      ifGenerationMatch=str(info["generation"]), timeout=_CALL_S)
      except (FileNotFoundError, FileExistsError):
        pass  # another run took it over first: the next round finds that one
    raise ModelDirInUseError(in_use_message(os.path.dirname(self.path),
                                            (self._read() or ({}, None))[0]))

  def why_stale(self, _: dict) -> str:
    return self._stale

  def renew(self) -> None:
    try:
      self._fs.call("PATCH", "b/{}/o/{}", self._bucket, self._key,
                    ifGenerationMatch=self._generation, timeout=_CALL_S,
                    json={"metadata": {"renewed": str(_now())}})
    except (FileNotFoundError, FileExistsError):
      raise ModelDirInUseError(
          f"{self.path} was taken over by another run while this one could not renew it: "
          "this run stops; "
          + in_use_message(os.path.dirname(self.path), self.read()))

  def give_back(self) -> None:
    try:
      self._fs.call("DELETE", "b/{}/o/{}", self._bucket, self._key,
                    ifGenerationMatch=self._generation, timeout=_CALL_S)
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
      self._stale = _stale_reason(
          previous, float(previous.get("renewed", previous.get("started", 0))))
      if self._stale is None:
        raise ModelDirInUseError(in_use_message(os.path.dirname(self.path), previous))
    self._token = record["token"]
    self._record = dict(record, renewed=_now())
    files.write_lines(self.path, [json.dumps(self._record)])
    time.sleep(1.0)  # a run that started together has written its own by now
    found = self.read()
    if not found or found.get("token") != self._token:
      raise ModelDirInUseError(in_use_message(os.path.dirname(self.path), found))
    return previous

  def why_stale(self, _: dict) -> str:
    return self._stale

  def renew(self) -> None:
    found = self.read()
    if found is not None and found.get("token") != self._token:
      raise ModelDirInUseError(
          f"{self.path} was taken over by another run while this one could not renew it: "
          "this run stops; " + in_use_message(os.path.dirname(self.path), found))
    self._record["renewed"] = _now()
    files.write_lines(self.path, [json.dumps(self._record)])

  def give_back(self) -> None:
    found = self.read()
    if found is None or found.get("token") == self._token:
      try:
        files.remove(self.path)
      except Exception:  # pylint: disable=broad-except
        pass


def _store_for(path: str):
  if files.is_local(path):
    return _LocalLock(path)
  fs = file_systems.gcs_with_preconditions(path)
  return _GcsLock(path, fs) if fs is not None else _PlainLock(path)
