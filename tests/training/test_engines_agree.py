"""The two engines run one optimizer: the TensorFlow engine's fused update
(bert_tf.training.tf_engine.optimizer) and the JAX engine's (bert_tf.training.jax_engine.optimizer)
against a NumPy transcription of the papers' formulas, and both trainers training the
same model from the same weights to the same losses and weights.

JAX runs in subprocesses (tests/engines_agree_worker.py): this process imported Keras with the
TensorFlow backend. So does the TensorFlow trainer of the training comparison, so that
each trainer runs alone in its process, as a user runs it.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import paths
import trainer_helpers
from bert_tf.checkpoints import portable
from bert_tf.tasks import base as task_base
from bert_tf.training import experiments
from bert_tf.training import trained_model
from bert_tf.training.tf_engine import optimizer as optimizers
from bert_tf.training import update_rule
from bert_tf.training.tf_engine.loss_scale import DynamicLossScale
from bert_tf.training.update_rule import UpdateRule

WORKER = os.path.join(paths.ROOT, "tests", "engines_agree_worker.py")
LEARNING_RATE, WEIGHT_DECAY, CLIPNORM = 0.1, 0.01, 1.0
EXCLUDE = ["layer_norm", "bias"]
# A decayed kernel, an excluded LayerNorm scale; per step their gradients (None: NaN).
# Step 1's global norm is below the clip norm, step 2's above it (clipped), step 3 is
# not finite (skipped), step 4 follows the skip (bias correction at t = 4).
VARIABLES = {"dense/kernel": [1.0, -2.0, 0.5], "layer_norm/gamma": [3.0, 4.0, -1.0]}
STEPS = [{"dense/kernel": [0.3, -0.1, 0.02], "layer_norm/gamma": [0.2, 0.4, -0.05]},
         {"dense/kernel": [2.0, -1.0, 0.5], "layer_norm/gamma": [1.5, 0.5, -3.0]},
         {"dense/kernel": None, "layer_norm/gamma": [0.1, 0.1, 0.1]},
         {"dense/kernel": [-0.2, 0.3, 0.0], "layer_norm/gamma": [0.05, -0.4, 0.3]}]
ALGORITHMS = ("adamw", "lamb", "sgd")


def reference(algorithm, beta_1=0.9, beta_2=0.999, epsilon=1e-6):
  """[{path: weights after step i}] in float64, from the formulas: Adam with bias
  correction and epsilon added to sqrt(v^) (Kingma & Ba, Algorithm 1), decoupled
  weight decay added to the update (Loshchilov & Hutter; the original BERT's
  AdamWeightDecayOptimizer), LAMB's trust ratio ||w|| / ||update|| (You et al.) on
  decayed variables, the gradients scaled to at most CLIPNORM in global norm, and a
  step whose gradients are not finite skipped, its count taken (t advances)."""
  w = {p: np.asarray(v, np.float64) for p, v in VARIABLES.items()}
  m = {p: np.zeros_like(v) for p, v in w.items()}
  v = {p: np.zeros_like(x) for p, x in w.items()}
  out = []
  for t, step in enumerate(STEPS, start=1):
    grads = {p: np.asarray(np.nan if g is None else g, np.float64) * np.ones_like(w[p])
             for p, g in step.items()}
    norm = np.sqrt(sum(np.sum(g * g) for g in grads.values()))
    if np.isfinite(norm):
      for p, g in grads.items():
        g = g * min(1.0, CLIPNORM / norm)
        decayed = not any(e in p for e in EXCLUDE)
        if algorithm == "sgd":
          update = g
        else:
          m[p] = beta_1 * m[p] + (1 - beta_1) * g
          v[p] = beta_2 * v[p] + (1 - beta_2) * g * g
          m_hat, v_hat = m[p] / (1 - beta_1 ** t), v[p] / (1 - beta_2 ** t)
          update = m_hat / (np.sqrt(v_hat) + epsilon)
        if decayed:
          update = update + WEIGHT_DECAY * w[p]
        if algorithm == "lamb" and decayed:
          update = update * np.linalg.norm(w[p]) / np.linalg.norm(update)
        w[p] = w[p] - LEARNING_RATE * update
    out.append(dict(w))
  return out


def _tensorflow_engine(algorithm):
  """[{path: weights after step i}] and [{name: optimizer state after step i}], from
  the TensorFlow engine's optimizer driven as its step drives it
  (tf_engine.step.TrainStep.replica_step)."""
  variables = []
  for path, value in VARIABLES.items():
    scope, name = path.rsplit("/", 1)
    with keras.name_scope(scope):
      variables.append(keras.Variable(np.asarray(value, np.float32), name=name))
  rule = UpdateRule(algorithm, lambda step: tf.constant(LEARNING_RATE),
                    weight_decay_rate=WEIGHT_DECAY, exclude_from_weight_decay=EXCLUDE)
  optimizer = optimizers.Optimizer(rule)
  optimizer.build(variables)
  counter = tf.Variable(0, dtype=tf.int64)
  weights, states = [], []
  for grads in STEPS:
    grads = [tf.constant(np.nan if g is None else g, tf.float32) * tf.ones(v.shape)
             for g, v in zip(grads.values(), variables)]
    _, scale, finite = update_rule.gradient_scale(tf.linalg.global_norm(grads),
                                                  tf.constant(1.0), None, CLIPNORM)
    optimizer.apply_gradients(grads, variables, counter.read_value(), should_apply=finite,
                              gradient_scale=scale, step_counter=counter)
    weights.append({v.path: v.numpy() for v in variables})
    states.append({k: s.numpy() for k, s in optimizer.state_variables(counter).items()})
  return weights, states


def _env(backend):
  env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
  env.update(KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2", JAX_PLATFORMS="cpu")
  return env


def _start(backend, *args):
  return subprocess.Popen([sys.executable, WORKER, *map(str, args)], env=_env(backend),
                          cwd=paths.ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)


def _finish(process, timeout=900):
  output = process.communicate(timeout=timeout)[0]
  assert process.returncode == 0, output[-4000:]
  line = [l for l in output.splitlines() if l.startswith("RESULT ")][-1]
  return json.loads(line[len("RESULT "):])


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_tensorflow_engine_matches_the_formulas_clips_and_skips_a_non_finite_step(algorithm):
  weights, states = _tensorflow_engine(algorithm)
  for got, want in zip(weights, reference(algorithm)):
    for path in VARIABLES:
      np.testing.assert_allclose(got[path], want[path], rtol=1e-5, atol=1e-6, err_msg=path)
  # The skipped step leaves every weight and slot as it was, to the bit.
  for path in VARIABLES:
    np.testing.assert_array_equal(weights[2][path], weights[1][path])
  for name in states[1]:
    if name != "count":  # Which counts the skipped step.
      np.testing.assert_array_equal(states[2][name], states[1][name])
  assert [int(state["count"]) for state in states] == [1, 2, 3, 4]


@pytest.fixture(scope="module")
def jax_updates(tmp_path_factory):
  """The JAX engine's weights, state and logs after each step, per algorithm."""
  directory = tmp_path_factory.mktemp("jax_updates")
  case = directory / "case.json"
  case.write_text(json.dumps({
      "variables": VARIABLES, "steps": STEPS, "learning_rate": LEARNING_RATE,
      "weight_decay_rate": WEIGHT_DECAY, "exclude": EXCLUDE, "global_clipnorm": CLIPNORM,
      "algorithms": ALGORITHMS, "loss_scale": {"initial_scale": 8.0, "growth_interval": 2}}))
  assert _finish(_start("jax", "updates", case, directory / "out.npz")) == {"backend": "jax"}
  return dict(np.load(directory / "out.npz"))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_jax_engine_matches_the_formulas_clips_and_skips_a_non_finite_step(algorithm,
                                                                          jax_updates):
  got = lambda step, kind, name: jax_updates[f"{algorithm}/{step}/{kind}/{name}"]
  for step, want in enumerate(reference(algorithm)):
    for path in VARIABLES:
      np.testing.assert_allclose(got(step, "weights", path), want[path], rtol=1e-5,
                                 atol=1e-6, err_msg=path)
    assert int(got(step, "state", "count")) == step + 1
  assert [float(got(step, "logs", "skipped_steps")) for step in range(4)] == [0, 0, 1, 0]
  assert float(got(1, "logs", "gradient_norm")) > CLIPNORM > float(got(0, "logs",
                                                                       "gradient_norm"))
  # The skipped step leaves every weight and slot as it was, to the bit.
  skipped = [k for k in jax_updates if k.startswith((f"{algorithm}/2/weights/",
                                                     f"{algorithm}/2/state/"))]
  assert len(skipped) == (3 if algorithm == "sgd" else 7)  # weights, count, moments
  for key in skipped:
    if not key.endswith("/count"):
      np.testing.assert_array_equal(jax_updates[key],
                                    jax_updates[key.replace("/2/", "/1/", 1)], err_msg=key)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_jax_engine_under_a_dynamic_loss_scale_applies_the_unscaled_update(algorithm,
                                                                          jax_updates):
  """Gradients times the scale, removed before clipping: the same weights; the scale
  doubles after 2 finite steps and halves at the skipped one."""
  for step, want in enumerate(reference(algorithm)):
    for path in VARIABLES:
      np.testing.assert_allclose(jax_updates[f"{algorithm}_scaled/{step}/weights/{path}"],
                                 want[path], rtol=1e-5, atol=1e-6, err_msg=path)
  assert [float(jax_updates[f"{algorithm}_scaled/{step}/logs/loss_scale"])
          for step in range(4)] == [8.0, 8.0, 16.0, 8.0]
  assert float(jax_updates[f"{algorithm}_scaled/3/state/loss_scale/scale"]) == 8.0


def test_both_engines_keep_the_same_state_names_and_values(jax_updates):
  _, states = _tensorflow_engine("adamw")
  for name, value in states[-1].items():
    np.testing.assert_allclose(jax_updates[f"adamw/3/state/{name}"], value, rtol=1e-5,
                               atol=1e-7, err_msg=name)


def test_dynamic_loss_scale_halves_on_a_skip_and_doubles_after_growth_interval():
  scale = DynamicLossScale(initial_scale=8.0, growth_interval=2)
  history = []
  for finite in (True, True, False, True, False):
    scale.update(tf.constant(finite))
    history.append((float(scale.scale.numpy()), int(scale.good_steps.numpy())))
  assert history == [(8.0, 1), (16.0, 0), (8.0, 0), (8.0, 1), (4.0, 0)]
  fixed = DynamicLossScale.from_string("128")
  fixed.update(tf.constant(False))
  assert float(fixed.scale.numpy()) == 128.0 and not bool(fixed.can_lower(128.0))


def _experiment_yaml(directory, steps):
  """A tiny pretraining experiment without dropout, in float32, one step per loop."""
  data = trainer_helpers.tiny_experiment_dict(
      steps=steps, model={"head_dropout_rate": 0.0},
      optimizer={"learning_rate": 1e-3, "warmup_steps": 3},
      trainer={"steps_per_loop": 1, "summary_interval": 1, "log_interval": 1,
               "checkpoint_interval": 1000, "max_to_keep": 1})
  experiment = experiments.experiment_from_dict(data)
  path = os.path.join(str(directory), "experiment.yaml")
  experiment.save(path)
  return experiment, path


STEPS_TRAINED = 20


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """Each engine's trainer, 20 steps from the same initial weights: (folder, initial
  weights {`weights/<path>`: array}). (A run that moves between engines through the
  trainer's own checkpoints: tests/integration/test_engine_move.py.)"""
  directory = tmp_path_factory.mktemp("engines")
  experiment, config = _experiment_yaml(directory, STEPS_TRAINED)
  keras.utils.set_random_seed(experiment.runtime.seed)
  model = trained_model.build(task_base.get_task(experiment))
  init = portable.save(str(directory / "init.h5"), model.trained_items)
  runs = {backend: _start(backend, "train", config, init, directory / f"{backend}.npz",
                          STEPS_TRAINED)
          for backend in ("tensorflow", "jax")}
  for backend, process in runs.items():
    assert _finish(process) == {"backend": backend}
  return directory, {f"weights/{v.path}": v.numpy() for v in model.trainable_variables}


def _assert_same_training(got, want, initial):
  """Per-step losses within 1e-5 relative, weights within 1e-6 (see below)."""
  np.testing.assert_allclose(got["loss"], want["loss"][-len(got["loss"]):], rtol=1e-5)
  assert sorted(got.files) == sorted(want.files) == sorted(["loss", *initial])
  for key in initial:
    np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-6, err_msg=key)


@pytest.mark.slow
def test_tensorflow_and_jax_trainers_train_the_same_20_steps(trained):
  """Same weights, same batches, dropout off, float32: the engines differ only in how
  their compilers order and fuse float32 operations (~1e-7 relative per operation).
  AdamW divides each gradient by its own root mean square, so a relative gradient
  difference d moves a weight by about d * lr per step: over 20 steps at lr <= 1e-3
  and d ~ 1e-5, 2e-7 (measured: 1.3e-8 at most, losses 2e-7 relative apart). The
  tolerances (losses 1e-5 relative, weights 1e-6) leave room for another CPU's kernels
  and are thousands of times smaller than what training changes (losses fall by ~0.4,
  weights move by up to ~1e-2); a difference in the maths (epsilon before bias
  correction, a schedule off by one step, decay on another set of variables) fails
  them."""
  directory, initial = trained
  tf_run, jax_run = (np.load(directory / f"{b}.npz") for b in ("tensorflow", "jax"))
  assert len(tf_run["loss"]) == STEPS_TRAINED
  assert tf_run["loss"][-1] < tf_run["loss"][0] - 0.2  # It learns.
  assert max(np.max(np.abs(tf_run[k] - initial[k])) for k in initial) > 5e-3  # They move.
  _assert_same_training(jax_run, tf_run, initial)
