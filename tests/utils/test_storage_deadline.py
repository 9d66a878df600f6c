"""Remote calls bounded in all (bert_tf.utils.file_systems.answer_within): a call that
gets no answer by the deadline raises TimeoutError naming the bound and the last failure
the client logged, the client's own logs are not printed meanwhile, and calls outside a
block are not bounded."""

import asyncio
import logging
import time

import pytest
from fsspec import asyn

from bert_tf.utils import file_systems


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


def test_a_call_without_answer_stops_at_the_deadline_naming_the_last_failure(caplog):
  files = file_systems.FsspecFiles(_StorageThatStopsAnswering(30.0, skip_instance_cache=True),
                                   "stalled://", object_store=True)
  start = time.monotonic()
  with caplog.at_level(logging.DEBUG):
    with pytest.raises(TimeoutError) as raised:
      with file_systems.answer_within(1.0):
        files.exists("stalled://bucket/x")
  assert time.monotonic() - start < 5
  assert str(raised.value) == ("no answer within 1 s (last error: Cannot connect to host "
                               "127.0.0.1:9 [Connection refused])")
  assert "retrying" not in caplog.text
  # Outside a block, no bound: the call takes its time.
  quick = file_systems.FsspecFiles(_StorageThatStopsAnswering(1.5, skip_instance_cache=True),
                                   "stalled://", object_store=True)
  assert quick.exists("stalled://bucket/x")
