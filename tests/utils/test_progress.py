"""bert_tf.utils.progress: the one progress line (done, rate, ETA)."""

import io

from bert_tf.utils import progress


class FakeClock:

  def __init__(self):
    self.now = 100.0

  def __call__(self):
    return self.now


def test_progress_line_has_percentage_rate_side_counts_and_eta():
  clock, stream = FakeClock(), io.StringIO()
  bar = progress.Progress("tool", total=4e6, unit="MB", scale=1e6, interval=5.0,
                          stream=stream, clock=clock)
  clock.now += 2.0
  bar.update(1e6, instances=500)  # Not yet due: nothing printed.
  assert stream.getvalue() == ""
  clock.now += 3.0
  bar.update(1e6, instances=500)
  assert stream.getvalue() == (
      "[tool] 50% 2/4 MB | 0.40 MB/s | instances 1,000 (200/s) | ETA 0:00:05\n")


def test_progress_prints_when_the_total_is_reached_and_without_total_has_no_eta():
  clock, stream = FakeClock(), io.StringIO()
  bar = progress.Progress("x", total=10, unit="examples", stream=stream, clock=clock)
  clock.now += 1.0
  bar.update(10)
  assert stream.getvalue() == "[x] 100% 10/10 examples | 10 examples/s | ETA 0:00:00\n"
  open_ended = progress.Progress("y", unit="lines", interval=None, clock=clock)
  open_ended.update(3)
  clock.now += 2.0
  assert open_ended.line() == "[y] 3 lines | 1.50 lines/s"


def test_step_logger_line_and_durations():
  lines = []
  logger = progress.StepLogger(total_steps=1000, global_batch_size=32, log_fn=lines.append)
  logger.log(200, {"loss": 5.12345}, steps_per_second=2.0)
  assert lines == ["step 200/1000 (20%) | loss 5.1235 | 64.0 seq/s | ETA 0:06:40"]
  assert logger.line(0, {}) == "step 0/1000 (0%)"
  assert progress.format_duration(3723.0) == "1:02:03"
  assert progress.format_duration(float("inf")) == "?"
