"""One training run per model_dir: `model_dir/run.lock`, taken before the run writes
anything there and given back when it ends.

The lock names its holder (bert_tf.training.lock_record: holder, host, pid, started,
lease_s and the time of its last renewal), so that a second run is refused in one line
naming the first. Several processes of one run (jax.distributed,
MultiWorkerMirroredStrategy) share it: the chief takes it for all
(bert_tf.training.trainer asks every process whether it was refused). How it is held
depends on the storage (bert_tf.training.lock_stores): a `flock` on local disk, a
renewed lease on an object created under a precondition on gs://, a file written and
read back elsewhere.
"""

import contextlib
import logging
import os
import threading
from typing import Callable, Iterator, Optional

from bert_tf.training import lock_record
from bert_tf.training import lock_stores
from bert_tf.utils import client_logs
from bert_tf.utils import storage_deadline
from bert_tf.utils import files


class RunLock:
  """The lock of one model_dir, held by this process.

  Args:
    model_dir: the run's directory (local or remote).
    log_fn: receives the line of a takeover.
    lease_s: how long the lock holds without renewal (remote storage).
  """

  def __init__(self, model_dir: str, log_fn: Callable[[str], None] = logging.info,
               lease_s: float = lock_record.LEASE_S):
    self.model_dir = model_dir
    self.path = os.path.join(model_dir, lock_record.LOCK_FILE)
    self._log = log_fn
    self.lease_s = lease_s
    self.record = lock_record.new_record(lease_s)
    self._store = lock_stores.store_for(self.path)
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
      self._log(f"Took over {self.path}, left by {lock_record.describe(previous)}: "
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
      # A renewal in flight ends by its own bound; while storage is failing it is not
      # waited for (a daemon thread) beyond one more try's time.
      self._renewer.join(storage_deadline.call_bound(self.lease_s))
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
                      storage_deadline.failure_reason(e), self.lease_s)

  def check(self) -> None:
    """Raises ModelDirInUseError where another run took the lock over (this one could
    not renew it within its lease)."""
    if self._lost is not None:
      raise lock_record.ModelDirInUseError(self._lost)

  def _renew_while_held(self) -> None:
    while not self._stop.wait(self.lease_s / 4):
      try:
        with client_logs.quiet_retries():
          self._store.renew()
      except lock_record.ModelDirInUseError as e:
        self._lost = str(e)
        return
      except Exception as e:  # pylint: disable=broad-except
        # Storage that does not answer now: the run's own writes report it.
        logging.debug("Renewing %s failed: %s", self.path, storage_deadline.failure_reason(e))

  def __enter__(self) -> "RunLock":
    return self.acquire()

  def __exit__(self, *exc) -> None:
    self.release()


class RunHold:
  """model_dir's lock held for all of a run's processes, re-entrantly: the chief takes
  it, every process learns through `any_process` (True where any process passes True)
  whether it was refused, and each raises ModelDirInUseError naming the holder then.
  `lock`: the chief's RunLock while held (None on the other processes and when not).
  `on_change` is called when the hold is taken and when it is given up: what the run
  knew of model_dir's files may have changed while it did not hold it."""

  def __init__(self, model_dir: str, is_chief: bool, any_process: Callable[[bool], bool],
               log_fn: Callable[[str], None], on_change: Callable[[], None] = lambda: None):
    self._model_dir, self._is_chief = model_dir, is_chief
    self._any_process, self._log = any_process, log_fn
    self._on_change = on_change
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
      except lock_record.ModelDirInUseError as e:
        refusal = e
    try:
      if self._any_process(refusal is not None):
        raise refusal or lock_record.ModelDirInUseError(
            lock_record.in_use_message(self._model_dir, holder_of(self._model_dir)))
      self._held = True
      self._on_change()
      yield
    finally:
      if self._held:
        self._on_change()
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
    return lock_stores.store_for(os.path.join(model_dir, lock_record.LOCK_FILE)).read()
  except Exception:  # pylint: disable=broad-except
    return None
