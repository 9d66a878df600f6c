"""How long storage calls may take: a deadline for the remote calls of a block
(`answer_within`: each call retried by its library until the deadline, then a
TimeoutError naming the last failure), and the state of storage failing (once a bounded
call failed, every other one gets FAILING_CALL_S until one is answered), so that a run
whose storage is lost stops within a minute. bert_tf.utils.file_systems bounds its
fsspec calls with `within_deadline`.
"""

import asyncio
import concurrent.futures
import contextlib
import inspect
import threading
import time
from typing import Iterator, Optional

from bert_tf.utils import client_logs

# Where the remote calls of this thread must have been answered (answer_within).
_DEADLINE = threading.local()
# How long the storage calls of one output (a checkpoint, a summary upload) may take in
# all, their retries included, before the writer gives up: five of gcsfs's tries (15 s
# of backoff, the sixth waits 16 s more), so that a run whose storage is lost stops
# within a minute on a loaded machine, its process's end included.
WRITE_BOUND_S = 30.0
# How long a storage call may take while storage is failing (a bounded call failed, on
# any thread, and none was answered since): one more try, not a new round of retries,
# so that what is left to write (a checkpoint's clean-up, a summary, the run's lock)
# ends within seconds once the first failure is known.
FAILING_CALL_S = 2.0
_FAILING = threading.Event()


def call_bound(seconds: float) -> float:
  """How long a storage call may take now: `seconds`, or at most FAILING_CALL_S while
  storage is failing (see answer_within)."""
  return min(seconds, FAILING_CALL_S) if _FAILING.is_set() else seconds


@contextlib.contextmanager
def answer_within(seconds: float) -> Iterator[None]:
  """Bounds the remote calls of the block (on this thread, fsspec route) to `seconds` in
  all: each is retried with backoff by its library (gcsfs: 6 tries, 1 to 16 s apart)
  until the deadline, then raises TimeoutError ("no answer within N s (last error:
  ...)", the last failure the client logged) where it has not failed with its own error
  before. The client's logs of failed requests are not printed: the caller reports the
  failure in one line. A deadline already set (an enclosing block) stays where it is
  earlier. Once a bounded call failed, on any thread, each call, under way or later,
  has at most FAILING_CALL_S more until one is answered (call_bound)."""
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
  """An fsspec asynchronous file system whose blocking calls run its coroutines on
  fsspec's loop until the deadline, or until storage has been failing (another call's
  failure) for FAILING_CALL_S; then the coroutine is cancelled."""

  def __init__(self, fs, at: float, seconds: float):
    self._fs, self._at, self._seconds = fs, at, seconds

  def __getattr__(self, name):
    method = getattr(self._fs, name)
    # fsspec's blocking twin of a coroutine `_NAME` (others, `open`, stay as they are).
    coroutine = getattr(self._fs, f"_{name}", None)
    if not inspect.iscoroutinefunction(coroutine):
      return method

    def bounded(*args, **kwargs):
      gave_up = client_logs.LAST_FAILURE.gave_up
      try:
        answer = _run_within(coroutine(*args, **kwargs), self._fs.loop, self._at)
      except (FileNotFoundError, FileExistsError):
        _answered(gave_up)
        raise
      except _NoAnswer:
        _FAILING.set()
        failure = client_logs.LAST_FAILURE.text
        last = f" (last error: {failure})" if failure else ""
        raise TimeoutError(f"no answer within {self._seconds:.0f} s{last}") from None
      except Exception:
        _FAILING.set()
        raise
      _answered(gave_up)
      return answer
    return bounded


class _NoAnswer(Exception):
  """A bounded call's time ran out."""


def _run_within(coroutine, loop, at: float):
  """The result of `coroutine` run on `loop` (fsspec's thread), or _NoAnswer once `at`
  passed or storage has been failing for FAILING_CALL_S of this call (call_bound), the
  coroutine then cancelled."""
  future = asyncio.run_coroutine_threadsafe(coroutine, loop)
  failing_since = None
  while True:
    now = time.monotonic()
    failing_since = (failing_since or now) if _FAILING.is_set() else None
    end = at if failing_since is None else min(at, failing_since + FAILING_CALL_S)
    try:
      return future.result(timeout=max(0.0, min(end - now, 0.5)))
    except concurrent.futures.TimeoutError:
      if future.done():
        raise  # the coroutine's own
      if time.monotonic() >= end:
        future.cancel()
        raise _NoAnswer() from None


def _answered(gave_up: int) -> None:
  """Storage answered a call: it is failing still where a request's retries ran out
  meanwhile (fsspec answers some calls all the same: `isdir` False), else no longer."""
  if client_logs.LAST_FAILURE.gave_up != gave_up:
    _FAILING.set()
  else:
    _FAILING.clear()


def within_deadline(fs):
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
