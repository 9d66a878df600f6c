"""The statistics of the benchmarks and the order of the interleaved rounds, in plain
Python (no TensorFlow, no numpy), so that a fast test checks them.

A run gives each system a list of rounds, each round a list of per-step seconds. A
system's figure is the median step over all its rounds, with its spread; the ratio of
two systems is the ratio of their median steps, with a bootstrap interval that resamples
whole rounds (the same rounds for both, since the systems shared each round's moments of
the machine), so that a ratio of 1.00x and one of 1.15x are told apart from the noise of
the run.
"""

import random
import statistics
from typing import Dict, List, Optional, Sequence, Tuple

Rounds = Sequence[Sequence[float]]


def round_order(names: Sequence[str], round_index: int) -> List[str]:
  """The order in which the systems run in round `round_index` (0-based): the list
  rotated by one place per round, so that each system starts first in turn (with two
  systems, the order alternates) and, over len(names) rounds, takes every place once.
  The first-started worker of a round measured about 2% slower in an A-vs-A run."""
  names = list(names)
  if not names:
    return []
  shift = round_index % len(names)
  return names[shift:] + names[:shift]


def round_plan(names: Sequence[str], rounds: int, compete: bool = False,
               compete_alternate: bool = False) -> List[Tuple[List[str], bool]]:
  """The rounds of a run: (order, whether the competing job runs) each.

  compete: the job runs in every round. compete_alternate: 2 x `rounds` rounds in
  pairs, both rounds of a pair in the same order (round_order of the pair), the first
  quiet and the second loaded, so that a system's loaded and quiet steps are compared
  pair by pair at the same place in the order.
  """
  if compete_alternate:
    return [(round_order(names, r // 2), r % 2 == 1) for r in range(2 * rounds)]
  return [(round_order(names, r), compete) for r in range(rounds)]


def median(values: Sequence[float]) -> float:
  """The median of `values`; nan when empty."""
  return statistics.median(values) if values else float("nan")


def quantile(values: Sequence[float], q: float) -> float:
  """The q-quantile (0 <= q <= 1) of `values`, linear between order statistics."""
  ordered = sorted(values)
  if not ordered:
    return float("nan")
  position = q * (len(ordered) - 1)
  low = int(position)
  high = min(low + 1, len(ordered) - 1)
  return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median_spread(values: Sequence[float]) -> Dict[str, float]:
  """{median, q1, q3, min, max, n} of `values` (nan figures when empty)."""
  if not values:
    nan = float("nan")
    return {"median": nan, "q1": nan, "q3": nan, "min": nan, "max": nan, "n": 0}
  return {"median": statistics.median(values), "q1": quantile(values, 0.25),
          "q3": quantile(values, 0.75), "min": min(values), "max": max(values),
          "n": len(values)}


def pooled_median(rounds: Rounds, picks: Optional[Sequence[int]] = None) -> float:
  """The median of the steps of the rounds `picks` (indices, repeats allowed; default
  every round)."""
  picks = range(len(rounds)) if picks is None else picks
  return median([s for i in picks for s in rounds[i]])


def speed_ratio(ours: Rounds, peer: Rounds, picks: Optional[Sequence[int]] = None) -> float:
  """How many times faster ours is: the peer's median step over ours."""
  return pooled_median(peer, picks) / pooled_median(ours, picks)


def bootstrap_ratio_interval(ours: Rounds, peer: Rounds, level: float = 0.95,
                             resamples: int = 2000, seed: int = 0) -> Tuple[float, float]:
  """A percentile bootstrap interval of speed_ratio(ours, peer) over rounds.

  Args:
    ours, peer: per-round lists of step seconds of the same run; round i of both
      shared the machine, so each resample draws round indices (with replacement) and
      takes those rounds of both systems.
    level: the interval's coverage.
    resamples: bootstrap replicates.
    seed: the random draws' seed (the interval is reproducible).

  Returns:
    (low, high). With one round the interval is the point estimate.
  """
  n = min(len(ours), len(peer))
  if n == 0:
    return float("nan"), float("nan")
  ours, peer = ours[:n], peer[:n]
  rng = random.Random(seed)
  ratios = sorted(speed_ratio(ours, peer, [rng.randrange(n) for _ in range(n)])
                  for _ in range(resamples))
  tail = (1.0 - level) / 2.0
  return quantile(ratios, tail), quantile(ratios, 1.0 - tail)


def format_interval(ratio: float, interval: Sequence[float]) -> str:
  """'1.29x [1.21, 1.37]'."""
  return f"{ratio:.2f}x [{interval[0]:.2f}, {interval[1]:.2f}]"


def load_summary(records: Sequence[dict]) -> str:
  """'load 0.31-0.52 (5/5 rounds quiet), others busy 0.02-0.10 CPUs' of round records."""
  loads = [r["load"] for r in records]
  others = [r["others_busy_cpus"] for r in records if r.get("others_busy_cpus") is not None]
  quiet = sum(1 for r in records if r.get("quiet"))
  text = f"1-min load {min(loads):.2f}-{max(loads):.2f} at round starts " \
         f"({quiet}/{len(records)} under the gate)" if loads else "no rounds"
  if others:
    text += f", others busy {min(others):.2f}-{max(others):.2f} CPUs"
  loaded = sum(1 for r in records if r.get("compete"))
  if loaded == len(records) and records:
    text += ", with a competing one-core job"
  elif loaded:
    text += f", a competing one-core job in {loaded}/{len(records)} rounds"
  return text


def step_summary(rounds: Rounds) -> dict:
  """The per-step figures of one system: median, quartiles, min/max (seconds) and the
  per-round lists they come from."""
  spread = median_spread([s for r in rounds for s in r])
  return {"median_step_seconds": spread["median"], "step_seconds_q1": spread["q1"],
          "step_seconds_q3": spread["q3"], "step_seconds_min": spread["min"],
          "step_seconds_max": spread["max"], "round_step_seconds": [list(r) for r in rounds]}


def ratio_with_interval(ours_rounds: Rounds, peer_rounds: Rounds) -> dict:
  """{"ratio", "interval"}: ours' speed over the peer's (the peer's median step over
  ours) with its 95% bootstrap interval over the shared rounds."""
  return {"ratio": speed_ratio(ours_rounds, peer_rounds),
          "interval": list(bootstrap_ratio_interval(ours_rounds, peer_rounds))}
