"""Tests that run the tools as several processes at once: their common end."""

import subprocess
import time
from typing import Callable, List, Sequence


def _tail(output: str, size: int = 3000) -> str:
  """The last `size` characters of an output, before the list of extension modules that
  Python's fatal-error report ends with (it would fill the tail and hide the cause)."""
  return output.split("\nExtension modules:", 1)[0][-size:]


def finish_all(processes: Sequence[subprocess.Popen], timeout: float = 600) -> List[str]:
  """The outputs of `processes` (started with stdout=PIPE, text=True) once they ended,
  asserting that every one exited 0 (the message shows each one's exit status and the
  tail of its output)."""
  outputs = [p.communicate(timeout=timeout)[0] for p in processes]
  assert [p.returncode for p in processes] == [0] * len(processes), "\n".join(
      f"process {i} exited {p.returncode}:\n{_tail(o)}"
      for i, (p, o) in enumerate(zip(processes, outputs)))
  return outputs


def wait_until(processes: Sequence[subprocess.Popen], condition: Callable[[], bool],
               timeout: float = 600, every: float = 0.05) -> None:
  """Returns once `condition()` holds, asserting meanwhile that every process still runs
  (the message shows the tail of the first one that ended) and that `timeout` did not
  pass."""
  deadline = time.time() + timeout
  while not condition():
    ended = [p for p in processes if p.poll() is not None]
    assert not ended and time.time() < deadline, ended and _tail(ended[0].communicate()[0])
    time.sleep(every)


def kill_all(processes: Sequence[subprocess.Popen]) -> None:
  """Kills the processes that still run and collects every one's end."""
  for process in processes:
    if process.poll() is None:
      process.kill()
    process.communicate()
