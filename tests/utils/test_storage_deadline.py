"""Remote calls bounded in all (bert_tf.utils.storage_deadline.answer_within): a call that
gets no answer by the deadline raises TimeoutError naming the bound and the last failure
the client logged, the client's own logs are not printed meanwhile, and calls outside a
block are not bounded."""

import asyncio
import logging
import threading
import time

import pytest
from fsspec import asyn

from bert_tf.utils import file_systems
from bert_tf.utils import storage_deadline


class _StorageThatStopsAnswering(asyn.AsyncFileSystem):
  """Each `exists` logs a failed try as gcsfs's retries do, then waits `delay_s`."""

  protocol = "stalled"

  def __init__(self, delay_s, **kwargs):
    super().__init__(**kwargs)
    self.delay_s = delay_s

  async def _exists(self, path, **kwargs):
    logging.getLogger("gcsfs").debug("_call retrying after exception: Cannot connect to "
                                     "host 127.0.0.1:9 [Connection refused]")
    await asyncio.sleep(self.delay_s)
    return True

  async def _isdir(self, path, **kwargs):
    # As fsspec's: a request out of retries is answered False.
    logging.getLogger("gcsfs").error("_call out of retries on exception: Cannot connect "
                                     "to host 127.0.0.1:9 [Connection refused]")
    return False


def test_a_call_without_answer_stops_at_the_deadline_naming_the_last_failure(caplog):
  files = file_systems.FsspecFiles(_StorageThatStopsAnswering(30.0, skip_instance_cache=True),
                                   "stalled://", object_store=True)
  start = time.monotonic()
  with caplog.at_level(logging.DEBUG):
    with pytest.raises(TimeoutError) as raised:
      with storage_deadline.answer_within(1.0):
        files.exists("stalled://bucket/x")
  assert time.monotonic() - start < 5
  assert str(raised.value) == ("no answer within 1 s (last error: Cannot connect to host "
                               "127.0.0.1:9 [Connection refused])")
  assert "retrying" not in caplog.text
  # Outside a block, no bound: the call takes its time.
  quick = file_systems.FsspecFiles(_StorageThatStopsAnswering(1.5, skip_instance_cache=True),
                                   "stalled://", object_store=True)
  assert quick.exists("stalled://bucket/x")


@pytest.fixture(autouse=True)
def _answering_after():
  """Storage answers again after each test: a call that failed here leaves no short
  tries to the tests after it."""
  yield
  storage_deadline._FAILING.clear()  # pylint: disable=protected-access


@pytest.fixture(name="failing_call_s")
def _failing_call_s(monkeypatch):
  """A short FAILING_CALL_S."""
  monkeypatch.setattr(storage_deadline, "FAILING_CALL_S", 0.3)
  return 0.3


def test_once_a_call_failed_each_call_has_one_short_try_until_one_is_answered(failing_call_s):
  def storage(delay_s):
    return file_systems.FsspecFiles(_StorageThatStopsAnswering(delay_s,
                                                               skip_instance_cache=True),
                                    "stalled://", object_store=True)
  with pytest.raises(TimeoutError):
    with storage_deadline.answer_within(0.5):
      storage(30.0).exists("stalled://bucket/x")
  # Another output (another thread's, or the clean-up of the same one) with a long bound
  # ends after one short try, its bound's words kept.
  assert storage_deadline.call_bound(20.0) == failing_call_s
  start = time.monotonic()
  with pytest.raises(TimeoutError, match="no answer within 60 s"):
    with storage_deadline.answer_within(60.0):
      storage(30.0).exists("stalled://bucket/x")
  assert time.monotonic() - start < failing_call_s + 1.5
  # A call already under way on another thread ends too, FAILING_CALL_S after the
  # failure, its coroutine cancelled.
  ended = []

  def under_way():
    try:
      with storage_deadline.answer_within(60.0):
        storage(30.0).exists("stalled://bucket/x")
    except TimeoutError as e:
      ended.append((time.monotonic(), str(e)))

  storage_deadline._FAILING.clear()  # pylint: disable=protected-access
  other = threading.Thread(target=under_way)
  other.start()
  with pytest.raises(TimeoutError):
    with storage_deadline.answer_within(0.5):
      storage(30.0).exists("stalled://bucket/x")
  failed_at = time.monotonic()
  other.join(10)
  assert ended and ended[0][0] - failed_at < failing_call_s + 1.5, ended
  assert ended[0][1].startswith("no answer within 60 s"), ended
  # An answer ends it: the next call has its whole bound again.
  with storage_deadline.answer_within(60.0):
    assert storage(0.05).exists("stalled://bucket/x")
  assert storage_deadline.call_bound(20.0) == 20.0
  with storage_deadline.answer_within(60.0):
    assert storage(failing_call_s * 3).exists("stalled://bucket/x")
  # A call answered though a request's retries ran out meanwhile met storage failing.
  with storage_deadline.answer_within(60.0):
    assert not storage(0.0).isdir("stalled://bucket/x")
  assert storage_deadline.call_bound(20.0) == failing_call_s
