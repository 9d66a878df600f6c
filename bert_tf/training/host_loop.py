"""The host side of a training run, shared by the trainers of every backend.

Steps run in loops of at most trainer.steps_per_loop steps, each ending at the next
summary, log, checkpoint (and validation) interval; at a loop's end the host sums its
results (bert_tf.training.reports), writes TensorBoard scalars, logs a progress line,
saves, evaluates, and stops cleanly when SIGTERM arrived. What a loop computes and how a
checkpoint is saved is the trainer's (`LoopHooks`).
"""

import contextlib
import dataclasses
import signal
import threading
import time
from typing import Callable, Dict, Sequence, Tuple

from bert_tf import configs
from bert_tf.training import reports
from bert_tf.utils import errors


class NonFiniteLossError(errors.UserError, FloatingPointError):
  """The training loss became NaN or Inf (a setting to change, such as the learning rate,
  so the tools report it in one line). A trainer's run_steps raises it before any
  checkpoint of the bad steps is written."""


@dataclasses.dataclass
class LoopHooks:
  """What the loop asks its trainer.

  run_steps(num_steps) -> (totals, step): runs that many steps and returns their
    summed results as floats and the global step after them; raises the trainer's
    error on a non-finite loss or a corrupt input.
  save() -> the path of a checkpoint written at the current step.
  evaluate() -> evaluation metrics.
  stop_requested() -> whether training stops at this loop boundary (SIGTERM here or,
    across processes, anywhere).
  stop(step) -> the line to log when stopping early: the trainer makes sure a
    checkpoint of `step` exists first.
  """

  run_steps: Callable[[int], Tuple[Dict[str, float], int]]
  save: Callable[[], str]
  evaluate: Callable[[], Dict[str, float]]
  stop_requested: Callable[[], bool]
  stop: Callable[[int], str]


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


def train_loops(config: configs.TrainerConfig, step: int, total: int, global_batch: int,
                evaluate_every: bool, hooks: LoopHooks, writer, progress,
                progress_metrics: Sequence[str], log: Callable[[str], None]
                ) -> Tuple[Dict[str, float], bool]:
  """Trains from `step` to `total` in loops; returns (the last report, whether it
  stopped early on request).

  The report averages the losses and metrics of the last summary window (plus
  eval/<metric> after an evaluation); `progress` (a StepLogger) shows
  `progress_metrics` of each log window.
  """
  intervals = [config.summary_interval, config.log_interval, config.checkpoint_interval]
  if evaluate_every:
    intervals.append(config.validation_interval)
  summary_window, log_window = reports.Window(), reports.Window()
  last_report: Dict[str, float] = {}
  first_call = True
  while step < total:
    num_steps = next_loop_length(step, total, config.steps_per_loop, intervals)
    start = time.time()
    totals, step = hooks.run_steps(num_steps)
    # The first loop's time includes compilation: it is left out of the rates.
    seconds = None if first_call else time.time() - start
    first_call = False
    summary_window.add(totals, num_steps, seconds)
    log_window.add(totals, num_steps, seconds)
    if step % config.summary_interval == 0 or step == total:
      last_report = reports.report(summary_window, global_batch)
      writer.write(last_report, step)
      summary_window = reports.Window()
    if step % config.log_interval == 0 or step == total:
      report = reports.report(log_window, global_batch)
      shown = {k: report[k] for k in progress_metrics if k in report}
      rate = (log_window.timed_steps / log_window.seconds) if log_window.seconds else None
      progress.log(step, shown, steps_per_second=rate)
      log_window = reports.Window()
    if step % config.checkpoint_interval == 0 or step == total:
      log(f"Saved checkpoint {hooks.save()}")
    if evaluate_every and (step % config.validation_interval == 0 or step == total):
      last_report.update({f"eval/{k}": v for k, v in hooks.evaluate().items()})
    if step < total and hooks.stop_requested():
      log(hooks.stop(step))
      if not last_report:
        last_report = reports.report(summary_window, global_batch)
      return last_report, True
  return last_report, False
