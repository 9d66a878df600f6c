"""The one trainer's policies, each tested once against both engines: a resumed run
continues the uninterrupted one, a non-finite loss stops before any checkpoint of the
bad steps and names the last good one, and a corrupt record stops with one line naming
the file, its offset and the checkpoint saved at the last finished step.

Each engine runs the scenarios (tests/policy_scenarios.py) in a process of its own
(tests/engine_worker.py), as Keras fixes its backend per process.
"""

import json
import os
import subprocess
import sys

import pytest

import paths
import policy_scenarios

ENGINES = ("tensorflow", "jax")


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  directory = tmp_path_factory.mktemp("records")
  policy_scenarios.write_records(str(directory / "clean.tfrecord"))
  policy_scenarios.write_records(str(directory / "nan.tfrecord"),
                                 nan_from=policy_scenarios.NAN_FROM_RECORD)
  offset = policy_scenarios.write_records(str(directory / "corrupt.tfrecord"),
                                          corrupt=policy_scenarios.CORRUPT_RECORD)
  return str(directory), offset


@pytest.fixture(scope="module", params=ENGINES)
def scenarios(request, records, tmp_path_factory):
  """(engine, its results of every scenario, the records' directory and the damaged
  record's offset)."""
  out_dir = tmp_path_factory.mktemp(f"policies_{request.param}")
  env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
  env.update(KERAS_BACKEND=request.param, TF_CPP_MIN_LOG_LEVEL="2")
  result = subprocess.run(
      [sys.executable, os.path.join(paths.ROOT, "tests", "engine_worker.py"), "policies",
       str(out_dir), records[0]], env=env, capture_output=True, text=True, timeout=900,
      cwd=paths.ROOT)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  line = [l for l in result.stdout.splitlines() if l.startswith("RESULT ")][-1]
  results = json.loads(line[len("RESULT "):])
  assert results["backend"] == request.param
  return request.param, results, records[0], records[1]


def test_resumed_run_continues_the_uninterrupted_one(scenarios):
  engine, results, _, _ = scenarios
  resume = results["resume"]
  assert resume["restored_from"] == "ckpt-4.h5" and resume["step"] == 6
  # Weights, optimizer state, step and dropout states, with dropout on: bit for bit.
  assert resume["difference"] == 0.0, engine


def test_non_finite_loss_stops_and_names_the_last_good_checkpoint(scenarios):
  engine, results, _, _ = scenarios
  nan = results["non_finite_loss"]
  assert nan["error"] is not None, engine
  assert "NaN or Inf within steps 5..6" in nan["error"]
  assert nan["error"].endswith("ckpt-4.h5")
  assert nan["checkpoints"] == ["ckpt-2.h5", "ckpt-4.h5"]
  assert nan["saved_finite"]
  # The poisoned steps were skipped: the weights in memory are the checkpoint's.
  assert nan["in_memory_minus_saved"] == 0.0


def test_corrupt_record_stops_in_one_line_naming_file_offset_and_checkpoint(scenarios):
  engine, results, directory, offset = scenarios
  corrupt = results["corrupt_record"]
  assert corrupt["error"] is not None and corrupt["user_error"], (engine, corrupt)
  path = os.path.join(directory, "corrupt.tfrecord")
  # The offset of the record, or of its data 12 bytes on (where the data CRC fails).
  assert path in corrupt["error"] and (
      str(offset) in corrupt["error"] or str(offset + 12) in corrupt["error"]), corrupt["error"]
  # The damaged record is in the 7th batch: steps 1-6 finished, and were saved.
  assert "Saved checkpoint" in corrupt["error"] and "at step 6" in corrupt["error"]
  assert "ckpt-6.h5" in corrupt["checkpoints"]
