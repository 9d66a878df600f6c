"""One progress line for long work: what is done, the rate and the time left.

`Progress` prints, at most every `interval` seconds, a line such as

  [create_pretraining_data] 45% 12.3/27.4 MB | 2.05 MB/s | instances 45,000 (59,000/s) | ETA 0:00:07

to a stream (stderr by default); `StepLogger` writes the trainer's step lines with the
same ETA (`format_duration`).
"""

import datetime
import logging
import sys
import time
from typing import Callable, Mapping, Optional, TextIO


def format_duration(seconds: float) -> str:
  """'1:02:03' from 3723.0; '?' when unknown (infinite or NaN)."""
  if seconds != seconds or seconds == float("inf"):
    return "?"
  return str(datetime.timedelta(seconds=int(max(seconds, 0))))


def _number(value: float) -> str:
  return f"{value:,.0f}" if value >= 100 or float(value).is_integer() else f"{value:.2f}"


class Progress:
  """Counts work toward an optional total and prints a periodic line with rate and ETA.

  Args:
    label: printed in brackets at the start of each line.
    total: the amount of work in `unit`s, or None when unknown (no percentage, no ETA).
    unit: what is counted ("examples", "MB", ...).
    scale: `done` and `total` are divided by this for display (1e6 shows bytes as MB).
    interval: seconds between lines; None prints nothing until `report()`.
    stream: where lines go.
    clock: seconds, monotonic (a fake one in tests).
  """

  def __init__(self, label: str, total: Optional[float] = None, unit: str = "items",
               scale: float = 1.0, interval: Optional[float] = 5.0,
               stream: Optional[TextIO] = None,
               clock: Callable[[], float] = time.monotonic):
    self.label = label
    self.total = total
    self.unit = unit
    self.scale = scale
    self.interval = interval
    self.stream = stream
    self._clock = clock
    self.done = 0.0
    self.counts = {}
    self.restart()

  def restart(self) -> None:
    """Rates and the ETA count from now (for example once workers are ready)."""
    self.start = self._clock()
    self._last = self.start

  def update(self, amount: float = 1, **counts: float) -> None:
    """Adds `amount` units of work and any named side counts; prints when due."""
    self.done += amount
    for name, value in counts.items():
      self.counts[name] = self.counts.get(name, 0) + value
    now = self._clock()
    finished = self.total is not None and self.done >= self.total
    if self.interval is not None and (now - self._last >= self.interval or finished):
      self._last = now
      self.report(now)

  def line(self, now: Optional[float] = None) -> str:
    """The progress line as of `now`."""
    elapsed = max((self._clock() if now is None else now) - self.start, 1e-9)
    rate = self.done / elapsed
    done = self.done / self.scale
    if self.total is not None:
      total = max(self.total, 1e-9)
      parts = [f"[{self.label}] {100.0 * self.done / total:.0f}% {_number(done)}/"
               f"{_number(self.total / self.scale)} {self.unit}"]
    else:
      parts = [f"[{self.label}] {_number(done)} {self.unit}"]
    parts.append(f"{_number(rate / self.scale)} {self.unit}/s")
    for name, value in self.counts.items():
      parts.append(f"{name} {_number(value)} ({_number(value / elapsed)}/s)")
    if self.total is not None:
      eta = (self.total - self.done) / rate if rate > 0 else float("inf")
      parts.append(f"ETA {format_duration(eta)}")
    return " | ".join(parts)

  def report(self, now: Optional[float] = None) -> str:
    """Prints and returns the line now."""
    line = self.line(now)
    print(line, file=self.stream or sys.stderr, flush=True)
    return line


class StepLogger:
  """Logs training progress: 'step 200/1000 (20%) | loss 5.1234 | 812.3 seq/s | ETA 0:01:23'.

  Args:
    total_steps: the step training ends at.
    global_batch_size: sequences per step, for the seq/s figure.
    start_step: the step training (re)started from.
    log_fn: receives each line (default: logging at INFO).
  """

  def __init__(self, total_steps: int, global_batch_size: int, start_step: int = 0,
               log_fn: Optional[Callable[[str], None]] = None):
    self.total_steps = total_steps
    self.global_batch_size = global_batch_size
    self.start_step = start_step
    self._log = log_fn or (lambda line: logging.info("%s", line))

  def line(self, step: int, metrics: Mapping[str, float],
           steps_per_second: Optional[float] = None) -> str:
    """The line at `step`; the rate and ETA appear once a rate is known."""
    percent = 100.0 * step / max(self.total_steps, 1)
    parts = [f"step {step}/{self.total_steps} ({percent:.0f}%)"]
    parts += [f"{name} {value:.4f}" for name, value in metrics.items()]
    if steps_per_second:
      parts.append(f"{steps_per_second * self.global_batch_size:.1f} seq/s")
      remaining = (self.total_steps - step) / steps_per_second
      parts.append(f"ETA {format_duration(remaining)}")
    return " | ".join(parts)

  def log(self, step: int, metrics: Mapping[str, float],
          steps_per_second: Optional[float] = None) -> str:
    """Logs and returns the line."""
    line = self.line(step, metrics, steps_per_second)
    self._log(line)
    return line
