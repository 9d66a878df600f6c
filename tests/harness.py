"""Checks every model and layer goes through: serialization, export, precision, training.

Usage from a test module:  `import harness`  (pytest puts tests/ on sys.path).
"""

import os

import keras
import numpy as np
import tensorflow as tf

from bert_tf import constants
from bert_tf.data import dummy
from bert_tf.models import BertEncoder

TINY_ENCODER = dict(vocab_size=100, hidden_size=32, num_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=64)


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


def run_config_round_trip(model, inputs):
  """get_config -> from_config builds a model with the same config and output structure."""
  config = model.get_config()
  clone = type(model).from_config(config)
  assert clone.get_config() == config
  clone.set_weights(model.get_weights())
  assert_nested_allclose(model(inputs), clone(inputs))


def run_keras_save_load(model, inputs, tmp_path):
  """Saving as .keras and loading gives identical outputs."""
  path = os.path.join(str(tmp_path), "model.keras")
  model.save(path)
  restored = keras.saving.load_model(path)
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
  signature = {k: tf.TensorSpec((None, None), v.dtype, name=k) for k, v in inputs.items()}
  archive.add_endpoint("serve", lambda features: flatten_outputs(model(features)),
                       input_signature=[signature])
  archive.write_out(path, verbose=False)
  reloaded = tf.saved_model.load(path)
  assert_nested_allclose(flatten_outputs(model(inputs)), reloaded.serve(inputs),
                         atol=1e-5, rtol=1e-5)


def float32_layer_outputs(model):
  """Names of the LayerNormalization layers, which must compute in float32."""
  bad = []
  for layer in model._flatten_layers(include_self=False):  # pylint: disable=protected-access
    if isinstance(layer, keras.layers.LayerNormalization) and layer.compute_dtype != "float32":
      bad.append(layer.path)
  return bad
