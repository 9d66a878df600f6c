"""Tests of the warm-up plus polynomial-decay learning-rate schedule."""

import numpy as np
import pytest

from bert_tf.training.schedules import WarmupPolynomialDecay


def _lr(schedule, step):
  return float(schedule(step).numpy())


def test_warmup_rises_linearly_from_zero_to_the_peak():
  schedule = WarmupPolynomialDecay(1e-3, warmup_steps=10, decay_steps=100)
  assert _lr(schedule, 0) == 0.0
  for step in (1, 5, 9):
    assert _lr(schedule, step) == pytest.approx(1e-3 * step / 10, rel=1e-6)


def test_linear_decay_follows_the_global_step_and_reaches_zero_at_decay_steps():
  schedule = WarmupPolynomialDecay(1e-3, warmup_steps=10, decay_steps=100)
  for step in (10, 50, 99):
    assert _lr(schedule, step) == pytest.approx(1e-3 * (1 - step / 100), rel=1e-5)
  assert _lr(schedule, 100) == 0.0
  assert _lr(schedule, 150) == 0.0


def test_polynomial_power_and_end_rate_match_the_definition():
  schedule = WarmupPolynomialDecay(2e-3, warmup_steps=0, decay_steps=40,
                                   end_learning_rate=1e-4, power=2.0)
  for step in (0, 7, 20, 39, 40, 60):
    p = min(step, 40) / 40
    expected = (2e-3 - 1e-4) * (1 - p) ** 2 + 1e-4
    assert _lr(schedule, step) == pytest.approx(expected, rel=1e-5)


def test_zero_decay_steps_keeps_the_peak_after_warmup():
  schedule = WarmupPolynomialDecay(1e-3, warmup_steps=4, decay_steps=0)
  assert _lr(schedule, 2) == pytest.approx(5e-4)
  assert np.allclose([_lr(schedule, s) for s in (4, 100, 10000)], 1e-3)


def test_config_round_trip_rebuilds_the_same_schedule():
  schedule = WarmupPolynomialDecay(1e-3, 10, 100, 1e-5, 0.5)
  clone = WarmupPolynomialDecay(**schedule.get_config())
  for step in (0, 5, 50, 200):
    assert _lr(clone, step) == _lr(schedule, step)
