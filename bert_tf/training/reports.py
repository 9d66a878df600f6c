"""Host-side sums of a training loop's step outputs, and the report made from them
(console line, TensorBoard scalars), shared by the trainers of every backend."""

from typing import Callable, Dict, Optional, Sequence

from bert_tf.training.steps import COUNTS
from bert_tf.training.steps import LEARNING_RATE


class Window:
  """Host-side sums of loop results between two reports."""

  def __init__(self):
    self.sums: Dict[str, float] = {}
    self.steps = 0
    self.timed_steps = 0
    self.seconds = 0.0

  def add(self, totals: Dict[str, float], steps: int, seconds: Optional[float]):
    for key, value in totals.items():
      self.sums[key] = self.sums.get(key, 0.0) + value
    self.steps += steps
    if seconds is not None:
      self.timed_steps += steps
      self.seconds += seconds


def report(window: Window, global_batch: int) -> Dict[str, float]:
  """The window's metrics: each `name/numerator` over its `name/denominator`, other
  values averaged over the steps, and sequences_per_second over the timed steps."""
  sums, steps = window.sums, max(window.steps, 1)
  out = {}
  for key, value in sums.items():
    if key.endswith("/numerator"):
      name = key[:-len("/numerator")]
      out[name] = value / max(sums[f"{name}/denominator"], 1e-12)
    elif key.endswith("/denominator") or key in COUNTS:
      continue
    else:
      out[key] = value / steps
  if window.seconds > 0:
    out["sequences_per_second"] = window.timed_steps * global_batch / window.seconds
  return out


class LoopReports:
  """What a training run reports of its loops' summed outputs: each summary window's
  report as TensorBoard scalars (`writer`, a SummaryWriter) every
  trainer.summary_interval steps, and each log window's `shown` metrics with its rate
  as a progress line (`progress`, a StepLogger) every trainer.log_interval steps; both
  at the run's last step `total` too. A report's learning_rate is the rate of the
  window's last update (`rate_at(step - 1)`, the schedule's rate of the update after
  `step - 1` updates), as Model Garden reports it, not the window's mean.

  Attributes:
    last: the report of the last summary window written ({} before the first).
  """

  def __init__(self, trainer_config, total: int, global_batch: int, writer, progress,
               shown: Sequence[str], rate_at: Optional[Callable[[int], float]] = None):
    self._summary_interval = trainer_config.summary_interval
    self._log_interval = trainer_config.log_interval
    self._total, self._global_batch = total, global_batch
    self._writer, self._progress, self._shown = writer, progress, tuple(shown)
    self._rate_at = rate_at
    self._summary_window, self._log_window = Window(), Window()
    self._step = 0
    self.last: Dict[str, float] = {}

  def _report(self, window: Window) -> Dict[str, float]:
    """`report` of the window, its learning_rate that of its last update."""
    out = report(window, self._global_batch)
    if self._rate_at is not None and LEARNING_RATE in out and self._step > 0:
      out[LEARNING_RATE] = self._rate_at(self._step - 1)
    return out

  def add(self, step: int, totals: Dict[str, float], steps: int,
          seconds: Optional[float]) -> None:
    """Adds a loop of `steps` steps ending at `step` (`seconds`: its time, None to leave
    it out of the rates), then writes the reports due at `step`."""
    self._step = step
    self._summary_window.add(totals, steps, seconds)
    self._log_window.add(totals, steps, seconds)
    if step % self._summary_interval == 0 or step == self._total:
      self.last = self._report(self._summary_window)
      self._writer.write(self.last, step)
      self._summary_window = Window()
    if step % self._log_interval == 0 or step == self._total:
      window = self._log_window
      logged = self._report(window)
      rate = window.timed_steps / window.seconds if window.seconds else None
      self._progress.log(step, {k: logged[k] for k in self._shown if k in logged},
                         steps_per_second=rate)
      self._log_window = Window()

  def latest(self) -> Dict[str, float]:
    """The last summary window's report, or that of the window being summed before the
    first was written (a run stopped early)."""
    return self.last or self._report(self._summary_window)
