"""The storage clients' own logs kept to one line: gcsfs logs each request that runs out
of retries with its traceback, and asyncio reports the tasks fsspec leaves behind when
a bounded call gives up; the caller's error already says why, in one line. The calls
that bert_tf.utils.storage_deadline.answer_within bounds keep gcsfs's last failure for
their error (LAST_FAILURE); checks that report in one line silence the retries
(quiet_retries)."""

import contextlib
import logging
import threading
from typing import Iterator


class _LastFailureHandler(logging.Handler):
  """Keeps the last failure gcsfs logged (its retries log each one, from its own
  thread), for the error of a call that ran out of time."""

  def __init__(self):
    super().__init__(logging.DEBUG)
    self.text = ""
    # The requests whose retries ran out, counted while a block is open: a call that
    # fsspec answers all the same (`isdir` is False) met storage failing too.
    self.gave_up = 0
    self._blocks = 0  # the answer_within blocks open, on every thread
    self._saved = None
    self._guard = threading.Lock()

  def listen(self) -> None:
    """Takes gcsfs's log records instead of its handlers (the first block to open)."""
    with self._guard:
      if self._blocks == 0:
        logger = logging.getLogger("gcsfs")
        self._saved = logger.level, logger.propagate
        self.text = ""
        logger.addHandler(self)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
      self._blocks += 1

  def stop(self) -> None:
    """Gives gcsfs's log records back (the last block to close)."""
    with self._guard:
      self._blocks -= 1
      if self._blocks == 0:
        logger = logging.getLogger("gcsfs")
        logger.removeHandler(self)
        logger.level, logger.propagate = self._saved

  def emit(self, record: logging.LogRecord) -> None:
    message = record.getMessage()
    if "exception:" in message:
      self.text = " ".join(message.split("exception:", 1)[1].split())
    if "out of retries" in message:
      self.gave_up += 1


LAST_FAILURE = _LastFailureHandler()


def _not_an_abandoned_fsspec_call(record: logging.LogRecord) -> bool:
  """False for asyncio's report of a task fsspec left when a bounded call gave up
  ("Task exception was never retrieved", with a traceback): the caller's error says
  it in one line."""
  message = record.getMessage()
  return not (message.startswith("Task exception was never retrieved")
              and "fsspec" in message)


logging.getLogger("asyncio").addFilter(_not_an_abandoned_fsspec_call)


def _without_traceback(record: logging.LogRecord) -> bool:
  """Keeps a gcsfs record to its one line: a request out of retries is logged with its
  traceback, also after a bounded call gave up on it (from fsspec's own thread), and the
  caller's error already says why in one line. A traceback is for bugs."""
  record.exc_info, record.exc_text = None, None
  return True


logging.getLogger("gcsfs").addFilter(_without_traceback)


@contextlib.contextmanager
def quiet_retries() -> Iterator[None]:
  """Silences the client libraries' own logs of failed requests (gcsfs logs each
  request that runs out of retries with its traceback), for a check whose failure is
  reported as one line."""
  logger = logging.getLogger("gcsfs")
  level = logger.level
  logger.setLevel(logging.CRITICAL)
  try:
    yield
  finally:
    logger.setLevel(level)
