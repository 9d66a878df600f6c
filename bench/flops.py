"""The utilisation figure of every MFU figure in bench/ (CPU and GPU alike), over the
model FLOPs of bert_tf.utils.model_flops (its docstring has the formula).

The denominator is bench/matmul_peak.py's rate, measured in the same run; utilisation_text
is how every table prints the quotient, and it prints nothing above 100%.
"""

import math
import sys
from typing import Optional


# A model cannot multiply faster than the product it is measured against: a figure above
# this says the denominator was measured at a slower moment, or in another precision.
MAX_UTILISATION = 1.0
SUSPECT = "n/a (over 100%: matmul rate suspect)"


def utilisation(model_flops_per_second: float,
                matmul_flops_per_second: Optional[float]) -> Optional[float]:
  """The model's FLOP rate as a fraction of the matmul rate (None without a rate)."""
  if not matmul_flops_per_second or not math.isfinite(matmul_flops_per_second):
    return None
  return model_flops_per_second / matmul_flops_per_second


def utilisation_text(fraction: Optional[float], digits: int = 0) -> str:
  """'86%' for 0.86; 'n/a' for None; SUSPECT for anything over MAX_UTILISATION, which no
  table prints (and says so on stderr): its matmul rate is not this run's peak."""
  if fraction is None or not math.isfinite(fraction):
    return "n/a"
  if fraction > MAX_UTILISATION:
    print(f"warning: utilisation {100 * fraction:.0f}% is above 100%: the matmul rate it "
          f"divides by was measured too low (another moment's load, another precision); "
          f"the figure is not reported", file=sys.stderr, flush=True)
    return SUSPECT
  return f"{100 * fraction:.{digits}f}%"


def encoder_forward_flops_per_sequence(layers: int, hidden: int, intermediate: int,
                                       seq_length: int) -> float:
  """Inference FLOPs of the encoder's blocks on one sequence of `seq_length` tokens: the
  projections and feed-forward products (2T(4H^2 + 2HI) per layer) and the attention
  scores and context (4T^2H per layer)."""
  return seq_length * layers * (2 * (4 * hidden**2 + 2 * hidden * intermediate)
                                + 4 * seq_length * hidden)
