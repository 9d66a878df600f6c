"""Checks every model and layer goes through: serialization, export, precision, training.

A model's test module describes the model once as a `ModelCase` and calls
`run_model_checks` (config round trip, `.keras` save and load, one training step and
a reload of the trained model, mixed_float16 and mixed_bfloat16) and
`run_saved_model_export`. Layers go through `run_layer_checks`.

Usage from a test module:  `import harness`  (pytest puts tests/ on sys.path).
"""

import dataclasses
import os
from typing import Callable, Dict, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from bert_tf import constants
from bert_tf.data import dummy
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
  return dummy.dummy_pretraining_batch(batch_size, seq_length, max_predictions, vocab_size,
                                       seed)


def encoder_inputs(batch):
  return {k: batch[k] for k in constants.ENCODER_INPUTS}


def assert_nested_allclose(a, b, atol=1e-6, rtol=1e-6):
  tf.nest.assert_same_structure(a, b)
  for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=atol, rtol=rtol)


def mean_square_loss(outputs, inputs):  # pylint: disable=unused-argument
  """A loss every float output contributes to: the mean square distance to 1, summed.

  (Not to 0: freshly initialized heads are already close to 0.)
  """
  return tf.add_n([tf.reduce_mean(tf.square(tf.cast(x, tf.float32) - 1.0))
                   for x in tf.nest.flatten(outputs)])


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
  """
  build: Callable[[], keras.Model]
  inputs: Callable[[], Dict[str, np.ndarray]]
  float32_outputs: Sequence[str]
  loss: Callable = mean_square_loss
  no_gradient: Sequence[str] = ()


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
