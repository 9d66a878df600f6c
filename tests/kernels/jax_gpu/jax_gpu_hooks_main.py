"""Run as a script with KERAS_BACKEND=jax (JAX_PLATFORMS=cpu): checks a tiny BertPretrainer
built with the JAX GPU speed path (bert_tf.kernels.jax_gpu.hooks, its Pallas kernels in
interpret mode) against the same model built without it, and prints one JSON line of
figures that tests/kernels/jax_gpu/test_jax_gpu_hooks.py asserts on:

  reference_vs_kernels   dropout off: the largest output and gradient differences
                         between the reference layers and the speed path (Pallas
                         attention and LayerNorms)
  pallas_vs_xla          dropout on: the same between the speed path with its Pallas
                         kernels and with XLA ops (which draw the same masks)
  dropout                dropout on: whether two steps from the same state agree, and
                         two successive steps differ; the seed states advanced
  for_runtime            what kernels.for_runtime returns on a JAX CPU and a (pretended)
                         JAX GPU
"""

import json

import jax
import jax.numpy as jnp
import keras
import numpy as np

from bert_tf import configs
from bert_tf import constants
from bert_tf import kernels
from bert_tf import losses
from bert_tf.kernels.jax_gpu import hooks
from bert_tf.models import BertEncoder, BertPretrainer

BATCH, LENGTH, PREDICTIONS = 3, 16, 3
ENCODER = dict(vocab_size=100, hidden_size=32, num_layers=2, num_attention_heads=2,
               intermediate_size=64, max_position_embeddings=64)


def _fused_kernels():
  """The speed path with both Pallas kernels, interpreted."""
  return hooks.JaxGpuKernels(attention="pallas", layer_norm="pallas", interpret=True)


def _model(kernels_=None, dropout=0.0):
  keras.utils.set_random_seed(0)
  config = configs.EncoderConfig(**ENCODER, dropout_rate=dropout,
                                 attention_dropout_rate=dropout)
  return BertPretrainer(BertEncoder.from_config_object(config, kernels=kernels_))


def _batch():
  rng = np.random.default_rng(1)
  mask = np.ones((BATCH, LENGTH), np.int32)
  mask[1, 11:] = 0
  return {
      constants.INPUT_WORD_IDS: rng.integers(0, 100, (BATCH, LENGTH)).astype(np.int32),
      constants.INPUT_MASK: mask,
      constants.INPUT_TYPE_IDS: (np.arange(LENGTH)[None] >= 7).repeat(BATCH, 0).astype(np.int32),
      constants.MASKED_LM_POSITIONS: np.array([[1, 4, 9], [2, 3, 10], [5, 6, 15]], np.int32),
      constants.MASKED_LM_IDS: rng.integers(0, 100, (BATCH, PREDICTIONS)).astype(np.int32),
      constants.MASKED_LM_WEIGHTS: np.ones((BATCH, PREDICTIONS), np.float32),
      constants.NEXT_SENTENCE_LABELS: np.array([0, 1, 0], np.int32),
  }


_STEPS = {}


def _loss_and_grads(model, batch, sparse_last_layer=True, non_trainable=None):
  """The loss, its gradients, the outputs and the new non-trainable values (seed
  states) of one training-mode call (compiled once per model and call form)."""
  names = (*constants.ENCODER_INPUTS, constants.MASKED_LM_POSITIONS)
  key = (id(model), sparse_last_layer)
  if key not in _STEPS:
    def loss_fn(trainable, non_trainable):
      model.sparse_last_layer = sparse_last_layer
      outputs, new_state = model.stateless_call(
          trainable, non_trainable, {name: batch[name] for name in names}, training=True)
      return losses.pretraining_loss(batch, outputs)["loss"], (outputs, new_state)
    _STEPS[key] = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))
  non_trainable = non_trainable or [v.value for v in model.non_trainable_variables]
  (loss, (outputs, new_state)), grads = _STEPS[key](
      [v.value for v in model.trainable_variables], non_trainable)
  return loss, grads, outputs, new_state


def _largest_differences(a, b):
  loss_a, grads_a, out_a, _ = a
  loss_b, grads_b, out_b, _ = b
  return {
      "loss": float(abs(loss_a - loss_b)),
      "logits": max(float(jnp.max(jnp.abs(out_a[k] - out_b[k]))) for k in out_a),
      "grads": max(float(jnp.max(jnp.abs(x - y))) for x, y in zip(grads_a, grads_b)),
      "grad_scale": max(float(jnp.max(jnp.abs(x))) for x in grads_a),
  }


def reference_vs_kernels():
  batch = _batch()
  reference = _model()
  fused = _model(_fused_kernels())
  out = {}
  for sparse in (True, False):
    out[f"sparse_last_layer={sparse}"] = _largest_differences(
        _loss_and_grads(reference, batch, sparse), _loss_and_grads(fused, batch, sparse))
  return out


def pallas_vs_xla():
  batch = _batch()
  pallas = _model(_fused_kernels(), dropout=0.1)
  xla = _model(hooks.JaxGpuKernels(attention="xla"), dropout=0.1)
  return _largest_differences(_loss_and_grads(pallas, batch, False),
                              _loss_and_grads(xla, batch, False))


def dropout():
  batch = _batch()
  model = _model(_fused_kernels(), dropout=0.1)
  state = [v.value for v in model.non_trainable_variables]
  first = _loss_and_grads(model, batch, False, state)
  again = _loss_and_grads(model, batch, False, state)
  second = _loss_and_grads(model, batch, False, list(first[3]))
  return {
      "same_state_same_loss": bool(first[0] == again[0]),
      "next_state_other_loss": bool(first[0] != second[0]),
      "seed_states_advanced": sum(int(not np.array_equal(a, b))
                                  for a, b in zip(state, first[3])),
      "seed_states": len(state),
  }


def for_runtime():
  out = {"cpu_unset": repr(kernels.for_runtime(configs.RuntimeConfig()))}
  try:
    kernels.for_runtime(configs.RuntimeConfig(fused_kernels=True))
    out["cpu_true"] = "no error"
  except configs.ConfigError as error:
    out["cpu_true"] = "ConfigError: " + str(error)
  kernels.jax_platform = lambda: "gpu"
  out["gpu_unset"] = type(kernels.for_runtime(configs.RuntimeConfig())).__name__
  out["gpu_false"] = repr(kernels.for_runtime(configs.RuntimeConfig(fused_kernels=False)))
  return out


if __name__ == "__main__":
  print(json.dumps({"reference_vs_kernels": reference_vs_kernels(),
                    "pallas_vs_xla": pallas_vs_xla(), "dropout": dropout(),
                    "for_runtime": for_runtime()}), flush=True)
