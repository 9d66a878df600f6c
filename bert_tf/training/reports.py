"""Host-side sums of a training loop's step outputs, and the report made from them
(console line, TensorBoard scalars), shared by the trainers of every backend."""

from typing import Dict, Optional

from bert_tf.training.steps import COUNTS


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
