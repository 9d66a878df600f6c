"""The stateless pieces of the Trainer's loop (bert_tf.training.trainer): the length of
the next loop of steps, SIGTERM recorded instead of ending the process, and the error
of a non-finite loss."""

import contextlib
import signal
import threading
from typing import Callable, Sequence

from bert_tf.utils import errors


class NonFiniteLossError(errors.UserError, FloatingPointError):
  """The training loss became NaN or Inf (a setting to change, such as the learning rate,
  so the tools report it in one line). A trainer's run_steps raises it before any
  checkpoint of the bad steps is written."""


@contextlib.contextmanager
def sigterm_recorded(record: Callable[[int], None]):
  """Within the block, SIGTERM calls record(signum) instead of ending the process.

  Only the main thread may install signal handlers; elsewhere SIGTERM keeps its action.
  """
  previous = None
  if threading.current_thread() is threading.main_thread():
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: record(signum))
  try:
    yield
  finally:
    if previous is not None:
      signal.signal(signal.SIGTERM, previous)


def next_loop_length(step: int, total: int, steps_per_loop: int,
                       intervals: Sequence[int]) -> int:
  """Steps of the next loop from `step`: at most steps_per_loop, ending at the next
  multiple of any interval or at `total`."""
  boundary = min([total] + [(step // i + 1) * i for i in intervals])
  return min(steps_per_loop, boundary - step)
