"""The benchmarks' statistics and round protocol (bench/stats.py, bench/machine_load.py):
the rotation of the round order, medians with their spread, the bootstrap interval of a
speed ratio over rounds, and the quiet gate. Pure Python, no TensorFlow."""

import os

import pytest

from bench import machine_load
from bench import stats


def test_two_systems_alternate_which_starts_first():
  orders = [stats.round_order(["ours", "peer"], r) for r in range(5)]
  assert orders == [["ours", "peer"], ["peer", "ours"], ["ours", "peer"],
                    ["peer", "ours"], ["ours", "peer"]]


def test_each_system_takes_every_place_once_per_cycle():
  names = ["ours", "model_garden", "keras_hub", "hf"]
  orders = [stats.round_order(names, r) for r in range(len(names))]
  for place in range(len(names)):
    assert sorted(order[place] for order in orders) == sorted(names)
  assert all(sorted(order) == sorted(names) for order in orders)
  assert stats.round_order([], 3) == []


def test_median_spread_of_steps():
  spread = stats.median_spread([5.0, 1.0, 4.0, 2.0, 3.0])
  assert spread == {"median": 3.0, "q1": 2.0, "q3": 4.0, "min": 1.0, "max": 5.0, "n": 5}
  assert stats.median_spread([1.0, 2.0, 3.0, 4.0])["q1"] == pytest.approx(1.75)
  assert stats.median_spread([])["n"] == 0


def test_speed_ratio_is_peer_step_over_ours():
  ours = [[1.0, 1.0], [1.0, 1.0]]
  peer = [[1.5, 1.5], [1.5, 1.5]]
  assert stats.speed_ratio(ours, peer) == pytest.approx(1.5)
  # Resampled rounds: round 1 twice.
  assert stats.speed_ratio([[1.0], [2.0]], [[2.0], [2.0]], [1, 1]) == pytest.approx(1.0)


def test_bootstrap_interval_is_a_point_without_noise():
  ours = [[2.0, 2.0, 2.0]] * 5
  peer = [[3.0, 3.0, 3.0]] * 5
  low, high = stats.bootstrap_ratio_interval(ours, peer)
  assert low == pytest.approx(1.5) and high == pytest.approx(1.5)


def test_bootstrap_interval_widens_with_noise_and_covers_the_estimate():
  # Both systems slowed together by a noisy machine: round i scales both steps.
  scale = [1.0, 1.3, 0.9, 1.6, 1.1, 1.0, 1.2]
  quiet_ours = [[1.0 * s] for s in scale]
  quiet_peer = [[1.15 * s] for s in scale]
  low, high = stats.bootstrap_ratio_interval(quiet_ours, quiet_peer)
  assert low <= 1.15 <= high
  # Noise that does not hit both systems alike: a wider interval.
  jitter = [1.0, 1.25, 0.85, 1.3, 0.95, 1.2, 0.8]
  noisy_peer = [[1.15 * s * j] for s, j in zip(scale, jitter)]
  noisy_low, noisy_high = stats.bootstrap_ratio_interval(quiet_ours, noisy_peer)
  ratio = stats.speed_ratio(quiet_ours, noisy_peer)
  assert noisy_low <= ratio <= noisy_high
  assert noisy_high - noisy_low > high - low + 0.05


def test_bootstrap_tells_1_00_from_1_15_on_steady_rounds():
  ours = [[1.0, 1.01, 0.99]] * 5
  same = [[1.0, 0.99, 1.01]] * 5
  faster = [[1.15, 1.16, 1.14]] * 5
  _, high_same = stats.bootstrap_ratio_interval(ours, same)
  low_faster, _ = stats.bootstrap_ratio_interval(ours, faster)
  assert high_same < low_faster


def test_bootstrap_is_reproducible_and_pairs_rounds():
  ours = [[1.0], [2.0], [1.5], [1.2], [1.8]]
  peer = [[1.1], [2.2], [1.65], [1.32], [1.98]]  # 1.1x ours in every round
  assert stats.bootstrap_ratio_interval(ours, peer, seed=3) == \
      stats.bootstrap_ratio_interval(ours, peer, seed=3)
  low, high = stats.bootstrap_ratio_interval(ours, peer)
  assert low == pytest.approx(1.1) and high == pytest.approx(1.1)
  assert stats.format_interval(1.1, (1.05, 1.2)) == "1.10x [1.05, 1.20]"


class _FakeClock:

  def __init__(self, loads):
    self.loads, self.now = list(loads), 0.0

  def loadavg(self):
    return (self.loads.pop(0) if len(self.loads) > 1 else self.loads[0], 0.0, 0.0)

  def sleep(self, seconds):
    self.now += seconds

  def clock(self):
    return self.now


def test_quiet_gate_waits_until_the_load_drops():
  fake = _FakeClock([2.0, 1.2, 0.4, 0.1])
  gate = machine_load.wait_for_quiet(0.5, timeout_s=60, poll_s=5, loadavg=fake.loadavg,
                                     sleep=fake.sleep, clock=fake.clock)
  assert gate == {"load_at_start": 2.0, "load": 0.4, "waited_s": 10.0, "quiet": 1.0}


def test_quiet_gate_gives_up_at_the_timeout_and_says_so():
  fake = _FakeClock([3.0])
  gate = machine_load.wait_for_quiet(0.5, timeout_s=12, poll_s=5, loadavg=fake.loadavg,
                                     sleep=fake.sleep, clock=fake.clock)
  assert gate["quiet"] == 0.0 and gate["load"] == 3.0
  assert gate["waited_s"] == pytest.approx(12.0)
  assert machine_load.wait_for_quiet(0.5, timeout_s=0, loadavg=fake.loadavg,
                                     sleep=fake.sleep, clock=fake.clock)["waited_s"] == 0.0


def test_competing_job_is_pinned_to_one_core_and_stopped():
  with machine_load.Competitor() as job:
    assert job.proc.poll() is None
    if hasattr(os, "sched_getaffinity"):
      assert os.sched_getaffinity(job.proc.pid) == {(os.cpu_count() or 1) - 1}
  assert job.proc.poll() is not None


def test_round_plan_pairs_quiet_and_loaded_rounds_in_the_same_order():
  plan = stats.round_plan(["ours", "peer", "other"], 3, compete_alternate=True)
  assert len(plan) == 6
  assert [loaded for _, loaded in plan] == [False, True] * 3
  for quiet, loaded in zip(plan[0::2], plan[1::2]):
    assert quiet[0] == loaded[0]
  assert [order[0] for order, _ in plan[0::2]] == ["ours", "peer", "other"]
  assert stats.round_plan(["a", "b"], 2, compete=True) == [(["a", "b"], True),
                                                           (["b", "a"], True)]
  assert stats.round_plan(["a", "b"], 1) == [(["a", "b"], False)]
