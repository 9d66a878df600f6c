"""One job at a time on a background thread, its failure raised on the thread that waits
for it (a training run's checkpoint writes, which the step does not wait for)."""

import threading
from typing import Callable, Optional


class BackgroundJob:
  """Runs one job at a time on its own thread.

  `start` first waits for the job before it, so at most one runs; `wait` returns once
  none runs and raises, once, the exception the finished job raised. The thread is not a
  daemon: the interpreter waits for a running job before the process exits.

  Args:
    name: the thread's name.
  """

  def __init__(self, name: str):
    self.name = name
    self._thread: Optional[threading.Thread] = None
    self._error: Optional[BaseException] = None

  @property
  def running(self) -> bool:
    return self._thread is not None and self._thread.is_alive()

  def start(self, job: Callable[[], None]) -> None:
    """Waits for the previous job (raising its exception), then starts `job`."""
    self.wait()

    def run():
      try:
        job()
      except BaseException as e:  # pylint: disable=broad-except
        self._error = e

    self._thread = threading.Thread(target=run, name=self.name, daemon=False)
    self._thread.start()

  def wait(self) -> None:
    """Returns once no job runs; raises the exception of the job that failed since the
    last wait."""
    if self._thread is not None:
      self._thread.join()
      self._thread = None
    error, self._error = self._error, None
    if error is not None:
      raise error
