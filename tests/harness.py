"""Checks every model and layer goes through: serialization, export, precision, training,
and the same numbers on TensorFlow, JAX and torch.

A model's test module describes the model once as a `ModelCase` and calls
`run_model_checks` (config round trip, `.keras` save and load, one training step and
a reload of the trained model, mixed_float16 and mixed_bfloat16) and
`run_saved_model_export`. It registers the case with `register_backend_case` and calls
`run_backend_parity` (the same outputs, loss and AdamW step on every backend, weights
crossing through `.weights.h5` both ways) and `run_torch_fit` (`model.fit` on torch):
the first such call runs every registered model on JAX and torch in one subprocess each
(backend_worker.py), and on TensorFlow here. Layers go through `run_layer_checks`.

Usage from a test module:  `import harness`  (pytest puts tests/ on sys.path).
"""

import atexit
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Callable, Dict, Optional, Sequence

import h5py
import keras
import numpy as np
import tensorflow as tf

import backend_worker
from backend_worker import mean_square_loss
from bert_tf import constants
from bert_tf.data.pipelines.loaders import pretraining as pretraining_kind
from bert_tf.models import BertEncoder

TINY_ENCODER = dict(vocab_size=100, hidden_size=32, num_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=64)

MIXED_POLICIES = ("mixed_float16", "mixed_bfloat16")


def tiny_encoder(dropout: float = 0.0, seed: int = 1, **overrides) -> BertEncoder:
  """A 2-layer, hidden-32 encoder with deterministic initial weights."""
  keras.utils.set_random_seed(seed)
  args = dict(TINY_ENCODER, dropout_rate=dropout, attention_dropout_rate=dropout)
  args.update(overrides)
  return BertEncoder(**args)


def pretraining_batch(batch_size=4, seq_length=16, max_predictions=4, vocab_size=100, seed=0):
  """The pretraining kind's pretraining_arrays as a dict of tensors."""
  return {k: tf.constant(v) for k, v in pretraining_kind.pretraining_arrays(
      batch_size, seq_length, max_predictions, vocab_size, seed).items()}


def encoder_inputs(batch):
  return {k: batch[k] for k in constants.ENCODER_INPUTS}


def assert_nested_allclose(a, b, atol=1e-6, rtol=1e-6):
  tf.nest.assert_same_structure(a, b)
  for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=atol, rtol=rtol)


@dataclasses.dataclass
class ModelCase:
  """What the harness needs to know about one model.

  build: makes the model under the current global dtype policy.
  inputs: the model's input dict (int32 arrays of the model's input shapes).
  float32_outputs: output names that stay float32 under mixed precision; the other
    outputs come out in the compute dtype.
  loss: (outputs, inputs) -> float32 scalar for the training step.
  no_gradient: substrings of the paths of variables the loss does not reach (a pooler
    under a head that reads the sequence output).
  family: the model family's loss on other backends (a key of backend_worker.LOSSES),
    for register_backend_case.
  """
  build: Callable[[], keras.Model]
  inputs: Callable[[], Dict[str, np.ndarray]]
  float32_outputs: Sequence[str]
  loss: Callable = mean_square_loss
  no_gradient: Sequence[str] = ()
  family: str = "encoder"


def run_config_round_trip(model, inputs):
  """get_config -> from_config builds a model with the same config and outputs."""
  config = model.get_config()
  clone = type(model).from_config(config)
  assert clone.get_config() == config
  clone.set_weights(model.get_weights())
  assert_nested_allclose(model(inputs), clone(inputs))


def run_keras_save_load(model, inputs, tmp_path, name="model.keras"):
  """Saving as .keras and loading gives the same class, config and identical outputs."""
  path = os.path.join(str(tmp_path), name)
  model.save(path)
  restored = keras.saving.load_model(path)
  assert type(restored) is type(model)
  assert restored.get_config() == model.get_config()
  assert_nested_allclose(model(inputs), restored(inputs), atol=0, rtol=0)
  return restored


def flatten_outputs(outputs):
  """{name: tensor or list of tensors} -> {name or name_i: tensor}, as signatures need."""
  flat = {}
  for name, value in outputs.items():
    if isinstance(value, (list, tuple)):
      flat.update({f"{name}_{i}": v for i, v in enumerate(value)})
    else:
      flat[name] = value
  return flat


def run_saved_model_export(model, inputs, tmp_path):
  """A SavedModel export, reloaded with tf.saved_model.load, gives the same outputs."""
  path = os.path.join(str(tmp_path), "saved_model")
  archive = keras.export.ExportArchive()
  archive.track(model)
  signature = {k: tf.TensorSpec((None,) * np.ndim(v), tf.as_dtype(v.dtype), name=k)
               for k, v in inputs.items()}
  archive.add_endpoint("serve", lambda features: flatten_outputs(model(features)),
                       input_signature=[signature])
  archive.write_out(path, verbose=False)
  reloaded = tf.saved_model.load(path)
  assert_nested_allclose(flatten_outputs(model(inputs)), reloaded.serve(inputs),
                         atol=1e-5, rtol=1e-5)


def float32_layer_outputs(model):
  """Paths of the LayerNormalization layers that do not compute in float32 (should be [])."""
  bad = []
  for layer in model._flatten_layers(include_self=False):  # pylint: disable=protected-access
    if isinstance(layer, keras.layers.LayerNormalization) and layer.compute_dtype != "float32":
      bad.append(layer.path)
  return bad


def softmax_dtypes(fn, *args):
  """The dtypes of every Softmax op in the graph of `fn(*args)`, nested functions included."""
  graph = tf.function(fn).get_concrete_function(*args).graph
  found = {op.outputs[0].dtype for op in graph.get_operations() if op.type == "Softmax"}
  for function in graph._functions.values():  # pylint: disable=protected-access
    for node in function.definition.node_def:
      if node.op == "Softmax":
        found.add(tf.as_dtype(node.attr["T"].type))
  return found


def run_training_steps(model, case: ModelCase, inputs, steps=3, learning_rate=1e-3,
                       compiled=False):
  """Takes `steps` Adam steps on one batch; checks gradients and updates.

  compiled: runs the step as a tf.function, which pays for its tracing from about ten
  steps on; a few steps run faster eagerly.

  Every gradient is finite, exactly the variables named in case.no_gradient get none,
  every other trainable variable changes, and the loss goes down. Returns the losses.
  """
  model(inputs)
  optimizer = keras.optimizers.Adam(learning_rate)
  variables = model.trainable_variables
  before = [v.numpy().copy() for v in variables]

  def step():
    with tf.GradientTape() as tape:
      loss = case.loss(model(inputs, training=True), inputs)
    grads = tape.gradient(loss, variables)
    pairs = [(g, v) for g, v in zip(grads, variables) if g is not None]
    optimizer.apply_gradients(pairs)
    return loss, grads

  if compiled:
    step = tf.function(step)
  losses = []
  for _ in range(steps):
    loss, grads = step()
    losses.append(float(loss))
    without = sorted(v.path for g, v in zip(grads, variables) if g is None)
    assert without == sorted(v.path for v in variables
                             if any(s in v.path for s in case.no_gradient)), without
    for g, v in zip(grads, variables):
      if g is not None:
        assert np.all(np.isfinite(tf.convert_to_tensor(g).numpy())), v.path
  assert np.isfinite(losses).all() and losses[-1] < losses[0], losses
  unchanged = [v.path for v, b in zip(variables, before)
               if np.array_equal(v.numpy(), b) and not any(s in v.path for s in case.no_gradient)]
  assert unchanged == []
  return losses


def run_mixed_precision(case: ModelCase, policy: str):
  """Under `policy`: float32 variables, LayerNorm and softmax; outputs in their dtypes."""
  previous = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy(policy)
  try:
    model = case.build()
    inputs = case.inputs()
    outputs = model(inputs)
    compute = policy.split("_")[1]
    assert all(v.dtype == "float32" for v in model.weights)
    assert float32_layer_outputs(model) == []
    for name, value in outputs.items():
      expected = "float32" if name in case.float32_outputs else compute
      assert all(x.dtype == expected for x in tf.nest.flatten(value)), (name, policy)
    assert softmax_dtypes(model, inputs) == {tf.float32}
    loss = case.loss(outputs, inputs)
    assert loss.dtype == tf.float32 and np.isfinite(float(loss))
  finally:
    keras.mixed_precision.set_global_policy(previous)


def run_model_checks(case: ModelCase, tmp_path, mixed_precision: Optional[Sequence[str]] = None):
  """The checks every model goes through, SavedModel export aside (run_saved_model_export).

  Config round trip, training steps, `.keras` save and load of the trained model with
  identical outputs, and the mixed-precision policies (MIXED_POLICIES by default).
  Returns the reloaded model.
  """
  model = case.build()
  inputs = case.inputs()
  run_config_round_trip(model, inputs)
  run_training_steps(model, case, inputs)
  restored = run_keras_save_load(model, inputs, tmp_path)
  for policy in MIXED_POLICIES if mixed_precision is None else mixed_precision:
    run_mixed_precision(case, policy)
  return restored


def run_layer_checks(make: Callable[[], keras.layers.Layer], args: Sequence,
                     float32_output: bool = False):
  """A layer's config round trip, gradients and mixed-precision dtypes.

  make: builds the layer under the current dtype policy. args: its call arguments
  (float tensors are cast to the compute dtype under mixed precision).
  float32_output: the layer's outputs stay float32 under mixed precision.
  """
  layer = make()
  expected = layer(*args)
  clone = type(layer).from_config(layer.get_config())
  clone(*args)
  clone.set_weights(layer.get_weights())
  assert clone.get_config() == layer.get_config()
  assert_nested_allclose(clone(*args), expected)

  float_args = [a for a in args if tf.as_dtype(a.dtype).is_floating]
  if layer.trainable_variables or float_args:
    with tf.GradientTape() as tape:
      tape.watch(float_args)
      loss = mean_square_loss(layer(*args, training=True), None)
    grads = tape.gradient(loss, layer.trainable_variables + float_args)
    assert all(g is not None and np.all(np.isfinite(tf.convert_to_tensor(g)))
               for g in grads)

  for policy in MIXED_POLICIES:
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(policy)
    try:
      compute = policy.split("_")[1]
      mixed = make()
      cast = [tf.cast(a, compute) if tf.as_dtype(a.dtype).is_floating else a for a in args]
      outputs = tf.nest.flatten(mixed(*cast))
      assert all(v.dtype == "float32" for v in mixed.weights)
      assert float32_layer_outputs(mixed) == []
      assert all(x.dtype == ("float32" if float32_output else compute) for x in outputs
                 if x.dtype.is_floating)
    finally:
      keras.mixed_precision.set_global_policy(previous)


# --------------------------------------------------------------------------------------
# The same numbers on TensorFlow, JAX and torch.

BACKENDS = ("tensorflow", "jax", "torch")
# Outputs and losses of the same weights and batch agree to float32 rounding (measured:
# at most 1e-6 on the tiny models).
OUTPUT_ATOL = 1e-5
LOSS_ATOL = 1e-5
# One AdamW step moves each weight by about lr = 1e-3; with backend_worker.ADAM_EPSILON
# the backends' rounding of the gradients changes that move by at most 1e-2 lr = 1e-5
# (measured: at most 4e-7), while a wrong gradient or update gets a whole step wrong.
STEP_ATOL = 1e-2 * backend_worker.LEARNING_RATE
WORKER_TIMEOUT_S = 600

_backend_cases: Dict[str, ModelCase] = {}
_backend_runs: Dict[str, dict] = {}


def register_backend_case(name: str, case: ModelCase) -> None:
  """Adds a model to the cross-backend run (run_backend_parity, run_torch_fit).

  A test module registers its cases when it is imported, so that the first check runs
  every collected model in one process per backend.
  """
  _backend_cases[name] = case


def _numpy(value):
  return np.asarray(tf.convert_to_tensor(value)) if tf.is_tensor(value) else np.asarray(value)


def _write_case(folder, name, case):
  """Writes the model's config, its weights and a batch with the family's labels."""
  model = case.build()
  inputs = {k: _numpy(v) for k, v in case.inputs().items()}
  outputs = backend_worker.flat_outputs(model(inputs))
  batch = {**inputs, **backend_worker.make_labels(case.family, inputs, outputs)}
  model.save_weights(os.path.join(folder, f"{name}.weights.h5"))
  np.savez(os.path.join(folder, f"{name}.npz"), **batch)
  with open(os.path.join(folder, f"{name}.json"), "w") as f:
    json.dump({"model": keras.saving.serialize_keras_object(model), "family": case.family},
              f)
  return outputs


def _run_backends():
  """Runs every registered model on every backend, once per set of models.

  JAX and torch run as subprocesses (backend_worker.py with KERAS_BACKEND set),
  TensorFlow in this process while they run. Returns {"folder", "reference" (the outputs
  of the models as built here), backend: {name: result}}.
  """
  key = ",".join(sorted(_backend_cases))
  if key in _backend_runs:
    return _backend_runs[key]
  folder = tempfile.mkdtemp(prefix="bert_tf_backends_")
  atexit.register(shutil.rmtree, folder, ignore_errors=True)
  reference = {name: _write_case(folder, name, case) for name, case in _backend_cases.items()}
  worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "backend_worker.py")
  processes = {}
  for backend in BACKENDS[1:]:
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    if backend == "torch":
      # torch's threads spin on these tiny ops: one thread takes a quarter of the CPU
      # time of two, and runs faster beside the other backends.
      env["OMP_NUM_THREADS"] = "1"
    processes[backend] = subprocess.Popen(
        [sys.executable, worker, folder], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
  run = {"folder": folder, "reference": reference,
         "tensorflow": backend_worker.run(folder, "tensorflow")}
  for backend, process in processes.items():
    log, _ = process.communicate(timeout=WORKER_TIMEOUT_S)
    path = os.path.join(folder, f"results.{backend}.json")
    assert process.returncode == 0 and os.path.exists(path), f"{backend} worker:\n{log}"
    with open(path) as f:
      run[backend] = json.load(f)
  _backend_runs[key] = run
  return run


def _backend_result(run, backend, name):
  result = run[backend][name]
  assert "error" not in result, f"{name} on {backend}:\n{result['error']}"
  return result


def _h5_layout(path):
  """{dataset path: (shape, dtype)} of a `.weights.h5` file."""
  layout = {}

  def visit(name, item):
    if isinstance(item, h5py.Dataset):
      layout[name] = (item.shape, str(item.dtype))

  with h5py.File(path, "r") as f:
    f.visititems(visit)
  return layout


def _trained_weights(model, path):
  """[(variable path, NumPy value)] of `model` after loading the weights file `path`."""
  model.load_weights(path)
  return [(v.path, v.numpy()) for v in model.weights]


def run_backend_parity(name: str) -> None:
  """The registered model `name` gives the same numbers on TensorFlow, JAX and torch.

  Its weights, written here with `save_weights`, load on each backend and give the same
  outputs (OUTPUT_ATOL) and loss (LOSS_ATOL); one AdamW step with Keras's trainer gives
  the same weights on each (STEP_ATOL); and each backend's trained weights, written there
  with `save_weights`, load here and give the outputs that backend computed
  (OUTPUT_ATOL). TensorFlow's own run, through the same file, reproduces this process's
  outputs exactly.
  """
  run = _run_backends()
  folder = run["folder"]
  case = _backend_cases[name]
  model = case.build()
  inputs = {k: _numpy(v) for k, v in case.inputs().items()}
  initial = [v.numpy() for v in model.weights]
  expected = _backend_result(run, "tensorflow", name)
  with np.load(os.path.join(folder, f"{name}.tensorflow.npz")) as f:
    tf_outputs = dict(f)
  for key, value in run["reference"][name].items():
    np.testing.assert_array_equal(tf_outputs[f"before/{key}"], value, err_msg=key)
  np.testing.assert_allclose(expected["train_on_batch_loss"], expected["loss"], rtol=1e-6)
  tf_trained = _trained_weights(model, os.path.join(folder, f"{name}.tensorflow.weights.h5"))
  moved = max(np.abs(w - w0).max() for (_, w), w0 in zip(tf_trained, initial))
  assert moved > 10 * STEP_ATOL, moved

  for backend in BACKENDS[1:]:
    result = _backend_result(run, backend, name)
    with np.load(os.path.join(folder, f"{name}.{backend}.npz")) as f:
      outputs = dict(f)
    assert sorted(outputs) == sorted(tf_outputs), backend
    for key in sorted(k for k in tf_outputs if k.startswith("before/")):
      np.testing.assert_allclose(outputs[key], tf_outputs[key], rtol=0, atol=OUTPUT_ATOL,
                                 err_msg=f"{name} on {backend}: {key}")
    for loss in ("loss", "train_on_batch_loss"):
      np.testing.assert_allclose(result[loss], expected[loss], rtol=0, atol=LOSS_ATOL,
                                 err_msg=f"{name} on {backend}: {loss}")
    path = os.path.join(folder, f"{name}.{backend}.weights.h5")
    assert _h5_layout(path) == _h5_layout(
        os.path.join(folder, f"{name}.tensorflow.weights.h5")), backend
    trained = _trained_weights(model, path)
    for (path, value), (_, tf_value) in zip(trained, tf_trained):
      np.testing.assert_allclose(value, tf_value, rtol=0, atol=STEP_ATOL,
                                 err_msg=f"{name} on {backend} after one step: {path}")
    reloaded = backend_worker.flat_outputs(model(inputs))
    for key, value in reloaded.items():
      np.testing.assert_allclose(value, outputs[f"after/{key}"], rtol=0, atol=OUTPUT_ATOL,
                                 err_msg=f"{name}: {backend}'s trained weights here: {key}")


def run_torch_fit(name: str) -> None:
  """`model.fit` on torch (CPU) trained the registered model `name`: finite losses, and
  every trainable variable changed but those the loss does not reach (case.no_gradient)."""
  result = _backend_result(_run_backends(), "torch", name)["fit"]
  no_gradient = _backend_cases[name].no_gradient
  assert len(result["losses"]) == backend_worker.FIT_EPOCHS
  assert np.all(np.isfinite(result["losses"])), result["losses"]
  untouched = [p for p in result["trainable"] if any(s in p for s in no_gradient)]
  assert result["unchanged"] == untouched, result["unchanged"]
