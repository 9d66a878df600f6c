"""The machine's load around the timed rounds: a gate that waits for a quiet machine
before each round, a sample of what other processes use, and a competing one-core busy
job (`--compete`), the same for every system. Plain Python (no TensorFlow)."""

import os
import subprocess
import sys
import time
from typing import Callable, Dict, Optional

# One core's worth of work that never ends: a Python float loop, no allocation, no
# system calls, so it competes for the core and nothing else.
_BUSY_LOOP = "x = 1.0\nwhile True:\n  x = x * 1.0000001 + 1e-9\n"


def wait_for_quiet(max_load: float, timeout_s: float, poll_s: float = 5.0,
                   loadavg: Callable[[], tuple] = os.getloadavg,
                   sleep: Callable[[float], None] = time.sleep,
                   clock: Callable[[], float] = time.monotonic) -> Dict[str, float]:
  """Waits until the 1-minute load average is at most `max_load`, or `timeout_s` passed.

  Our own workers add to the load average of the minute after a round, so a strict
  threshold costs up to a minute per round on an otherwise idle machine.

  Returns:
    {"load_at_start", "load" (when the wait ended), "waited_s", "quiet" (0/1: the
    threshold was reached)}.
  """
  start = clock()
  first = load = loadavg()[0]
  while load > max_load and clock() - start < timeout_s:
    sleep(min(poll_s, max(0.0, timeout_s - (clock() - start))))
    load = loadavg()[0]
  return {"load_at_start": first, "load": load, "waited_s": clock() - start,
          "quiet": float(load <= max_load)}


def _cpu_jiffies():
  with open("/proc/stat") as f:
    fields = [int(v) for v in f.readline().split()[1:]]
  idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
  return sum(fields[:8]) - idle, sum(fields[:8])


def busy_cpus(seconds: float = 1.0) -> Optional[float]:
  """How many CPUs were busy, on average, over the next `seconds` (None without
  /proc/stat). Sampled between rounds, while the workers wait for their next command,
  it is what the other processes of the machine use."""
  try:
    busy0, total0 = _cpu_jiffies()
    time.sleep(seconds)
    busy1, total1 = _cpu_jiffies()
  except (OSError, ValueError, IndexError):
    return None
  if total1 == total0:
    return 0.0
  return (os.cpu_count() or 1) * (busy1 - busy0) / (total1 - total0)


class Competitor:
  """A one-core busy process, pinned to the last CPU where the platform allows, started
  and stopped around a round's timed steps (a context manager)."""

  def __init__(self, cpu: Optional[int] = None):
    self.cpu = (os.cpu_count() or 1) - 1 if cpu is None else cpu
    self.proc = None

  def __enter__(self):
    self.proc = subprocess.Popen([sys.executable, "-c", _BUSY_LOOP],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    if hasattr(os, "sched_setaffinity"):
      try:
        os.sched_setaffinity(self.proc.pid, {self.cpu})
      except OSError:
        pass  # Unpinned it still takes one core's worth of time.
    return self

  def __exit__(self, *exc):
    self.proc.terminate()
    self.proc.wait(timeout=30)
    return False
