"""A run moves between engines: a checkpoint written on TensorFlow resumes on JAX and
one written on JAX resumes on TensorFlow, continuing the trajectory of the run that
stayed on the first engine (dropout off), whether the input is one file read in file
order, three files shuffled by the default input settings, or raw GLUE-style TSV files
shuffled so: both engines read the records (and the raw files' examples, numbered as
rows) in one order (bert_tf.data.records.record_order).

The two engines compute the same maths in different orders (XLA on JAX, TensorFlow's
kernels), so float32 runs agree to rounding, not bit for bit: after the move the losses
stay within 1e-5 (relative) of the unmoved run's and the weights within 1e-6, the
bounds tests/training/test_engines_agree.py states for 20 steps from one
initialization. The same seed builds the same model on both engines (the initializer
draws with NumPy), so the runs that stay on either engine agree as well.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import finetuning_helpers
import paths
import policy_scenarios
from bert_tf.checkpoints import portable
from bert_tf.training import summaries

STEPS = policy_scenarios.MOVE_STEPS
HALF = STEPS // 2
LOSS_RTOL, WEIGHT_ATOL = 1e-5, 1e-6


def _worker(backend, commands):
  """Runs `commands` ([COMMAND, ARGS...] each) of tests/engine_worker.py in one process on
  `backend`; returns their RESULTs."""
  env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
  env.update(KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2")
  result = subprocess.run(
      [sys.executable, os.path.join(paths.ROOT, "tests", "engine_worker.py"), "several",
       json.dumps([[str(arg) for arg in command] for command in commands])],
      env=env, capture_output=True, text=True, timeout=1800, cwd=paths.ROOT)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  line = [l for l in result.stdout.splitlines() if l.startswith("RESULT ")][-1]
  return json.loads(line[len("RESULT "):])


def _losses(model_dir):
  return [value for _, value in summaries.read_scalars(os.path.join(model_dir, "train"))["loss"]]


# The worker command that trains, and the files it reads: pretraining records, or
# raw GLUE-style TSV files (featurized in memory, their examples numbered as rows).
INPUTS = {"one_file_in_order": ("train_to", 1, "tfrecord"),
          "three_files_shuffled": ("shuffled_train_to", 3, "tfrecord"),
          "two_tsv_files_shuffled": ("tsv_train_to", 2, "tsv")}


@pytest.fixture(scope="module", name="moves")
def _moves(tmp_path_factory):
  """For each input of INPUTS, model dirs: 8 steps on each engine, and 4 steps on one
  then 4 on the other; and the initial weights each engine builds with seed 7 (first). Each
  engine's share of the work runs in one process (three in all: TensorFlow, JAX, then
  TensorFlow again for the moves from JAX)."""
  directory = tmp_path_factory.mktemp("move")
  shares = {"tf": [], "jax": [], "tf_again": []}
  runs = {}
  for name, (command, num_files, suffix) in INPUTS.items():
    paths = [str(directory / f"{name}-{i}.{suffix}") for i in range(num_files)]
    for seed, path in enumerate(paths):
      if suffix == "tsv":
        policy_scenarios.write_tsv(path, seed=seed)
      else:
        policy_scenarios.write_records(path, seed=seed)
    inputs = [",".join(paths)]
    if suffix == "tsv":
      inputs.append(finetuning_helpers.write_vocab(directory / f"{name}-vocab.txt"))
    dirs = {run: str(directory / name / run)
            for run in ("tf", "jax", "tf_then_jax", "jax_then_tf")}
    shares["tf"].append([command, *inputs, dirs["tf"], STEPS, dirs["tf_then_jax"], HALF])
    shares["jax"].append([command, *inputs, dirs["jax"], STEPS, dirs["jax_then_tf"], HALF,
                          dirs["tf_then_jax"], STEPS])
    shares["tf_again"].append([command, *inputs, dirs["jax_then_tf"], STEPS])
    runs[name] = dirs
  weights = {backend: directory / f"{backend}.npz" for backend in ("tensorflow", "jax")}
  shares["tf"].insert(0, ["initial_weights", 7, weights["tensorflow"]])
  shares["jax"].insert(0, ["initial_weights", 7, weights["jax"]])
  for share, backend in (("tf", "tensorflow"), ("jax", "jax"), ("tf_again", "tensorflow")):
    _worker(backend, shares[share])
  return runs, weights


@pytest.mark.parametrize("inputs", list(INPUTS))
@pytest.mark.parametrize("moved, first", [("tf_then_jax", "tf"), ("jax_then_tf", "jax")])
def test_a_run_resumes_on_the_other_engine_and_follows_its_trajectory(moves, inputs, moved,
                                                                      first):
  runs = moves[0][inputs]
  losses = _losses(runs[moved])
  assert len(losses) == STEPS
  # The first half is the first engine's own run, step for step.
  np.testing.assert_array_equal(losses[:HALF], _losses(runs[first])[:HALF])
  # After the move: within rounding of the runs that stayed on either engine.
  moved_weights = portable.arrays(os.path.join(runs[moved], f"ckpt-{STEPS}.h5"))
  for reference in ("tf", "jax"):
    straight = _losses(runs[reference])
    np.testing.assert_allclose(losses, straight, rtol=LOSS_RTOL)
    assert policy_scenarios.largest_difference(
        moved_weights,
        portable.arrays(os.path.join(runs[reference], f"ckpt-{STEPS}.h5")),
        "items/") < WEIGHT_ATOL
  assert losses[-1] != losses[HALF - 1]  # it trained on


def test_the_same_seed_builds_the_same_model_on_both_engines(moves):
  on_tf, on_jax = (np.load(moves[1][backend]) for backend in ("tensorflow", "jax"))
  assert sorted(on_tf.files) == sorted(on_jax.files) and len(on_tf.files) > 40
  for key in on_tf.files:
    np.testing.assert_array_equal(on_tf[key], on_jax[key], err_msg=key)
