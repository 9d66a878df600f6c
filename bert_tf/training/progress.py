"""A periodic console line: step/total, loss, throughput and the time left."""

import datetime
import logging
from typing import Mapping, Optional


def format_duration(seconds: float) -> str:
  """'1:02:03' from 3723.0."""
  return str(datetime.timedelta(seconds=int(max(seconds, 0))))


class ProgressLogger:
  """Logs 'step 200/1000 (20%) | loss 5.1234 | 812.3 seq/s | ETA 0:01:23'."""

  def __init__(self, total_steps: int, global_batch_size: int, start_step: int = 0,
               log_fn=None):
    self.total_steps = total_steps
    self.global_batch_size = global_batch_size
    self.start_step = start_step
    self._log = log_fn or (lambda line: logging.info("%s", line))

  def line(self, step: int, metrics: Mapping[str, float],
           steps_per_second: Optional[float] = None) -> str:
    """The progress line at `step`; rate and ETA appear once a rate is known."""
    percent = 100.0 * step / max(self.total_steps, 1)
    parts = [f"step {step}/{self.total_steps} ({percent:.0f}%)"]
    for name, value in metrics.items():
      parts.append(f"{name} {value:.4f}")
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
