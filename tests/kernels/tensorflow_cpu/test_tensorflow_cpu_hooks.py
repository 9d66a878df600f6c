"""The TensorFlow CPU speed path's hooks (bert_tf.kernels.tensorflow_cpu.hooks): its
dropout draws `keep_bits` masks at the rate, and the encoder, a Transformer block and the
pretrainer built with these kernels give the same outputs and gradients as the same
models built without them (the reference layers).

Tolerances: outputs atol 1e-5; gradients rtol 1e-4 with atol 1e-5 (float32)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import layers
from bert_tf import kernels
from bert_tf.kernels.tensorflow_cpu import fused
from bert_tf.kernels.tensorflow_cpu import hooks
from bert_tf.models import BertEncoder
from bert_tf.models import BertPretrainer


def test_keep_bits_is_the_mask_that_fused_dropout_applies():
  x = tf.random.normal([8, 32])
  drawn = keras.layers.Dropout(0.1, seed=5)
  bits, threshold, scale = fused.keep_bits(drawn, x, training=True)
  applied = hooks.dropout(keras.layers.Dropout(0.1, seed=5), x, training=True)
  np.testing.assert_allclose(applied, tf.where(bits >= threshold, x * scale, 0.0))
  assert fused.keep_bits(drawn, x, training=False) is None
  assert fused.keep_bits(keras.layers.Dropout(0.0), x, training=True) is None
  with pytest.raises(ValueError, match="noise_shape"):
    fused.keep_bits(keras.layers.Dropout(0.1, noise_shape=(8, 1)), x, training=True)


@pytest.mark.parametrize("shape", [(64, 128), (7, 5, 33)])
def test_fused_dropout_drops_at_the_rate_and_keeps_the_expectation(shape):
  layer = keras.layers.Dropout(0.1, seed=3)
  x = tf.ones(shape)
  out = hooks.dropout(layer, x, training=True).numpy()
  kept = out != 0
  assert out.shape == shape
  assert abs(1.0 - kept.mean() - 6554 / 65536) < 4 * np.sqrt(0.09 / out.size)
  np.testing.assert_allclose(out[kept], 65536 / (65536 - 6554), rtol=1e-6)
  np.testing.assert_array_equal(hooks.dropout(layer, x, training=False), x)
  # Each call draws a new mask.
  assert (hooks.dropout(layer, x, training=True).numpy() != out).any()


def test_fused_dropout_under_xla_is_the_same_draw_and_gradient_is_the_mask():
  x = tf.random.normal([16, 24])
  masks = []
  for jit_compile in (False, True):
    layer = keras.layers.Dropout(0.5, seed=7)

    @tf.function(jit_compile=jit_compile)
    def run(x):
      with tf.GradientTape() as tape:
        tape.watch(x)
        y = hooks.dropout(layer, x, training=True)  # pylint: disable=cell-var-from-loop
        total = tf.reduce_sum(y)
      return y, tape.gradient(total, x)

    y, grad = run(x)
    np.testing.assert_allclose(grad.numpy(), np.where(y.numpy() != 0, 2.0, 0.0))
    masks.append(y.numpy() != 0)
  np.testing.assert_array_equal(masks[0], masks[1])


# ----- The switch: the same outputs and gradients on and off. -----

_GRADIENT_TOLERANCE = dict(rtol=1e-4, atol=1e-5)


def _compiled_functions(concrete_function):
  """Names of the XLA-compiled functions a traced step calls."""
  library = concrete_function.graph.as_graph_def().library.function
  return {f.signature.name for f in library if "_XlaMustCompile" in f.attr}


def _same_dropout_masks(monkeypatch):
  """Plain keras.layers.Dropout draws its masks as the fused form does (keep_bits), so
  that both paths drop the same elements, seed for seed."""
  monkeypatch.setattr(keras.layers.Dropout, "call",
                      lambda self, inputs, training=False: hooks.dropout(self, inputs,
                                                                          training))


def _run_both_ways(build, call, inputs, monkeypatch, dropout):
  """Outputs and gradients of sum(outputs * weights) under tf.function with static
  shapes, of the model `build(kernels)` makes with the fused kernels and of the same
  model without them, with the same variables (seed-generator states included).

  Returns:
    (on, off, number of outputs): on and off each a list of numpy arrays, outputs then
    gradients.
  """
  if dropout:
    _same_dropout_masks(monkeypatch)
  with_kernels = build(hooks.KERNELS)
  reference = build(None)
  call(with_kernels, inputs)  # builds
  call(reference, inputs)
  for target, source in zip(reference.variables, with_kernels.variables):
    target.assign(source)
  results, compiled = [], []
  def step_of(model):
    @tf.function
    def step(inputs):
      with tf.GradientTape() as tape:
        outputs = tf.nest.flatten(call(model, inputs, training=True))
        loss = sum(tf.reduce_sum(o * tf.sin(tf.range(o.shape[-1], dtype=o.dtype)))
                   for o in outputs)
      return outputs, tape.gradient(loss, model.trainable_variables)
    return step

  for model in (with_kernels, reference):
    concrete = step_of(model).get_concrete_function(inputs)
    compiled.append(_compiled_functions(concrete))
    outputs, grads = concrete(inputs)
    results.append([o.numpy() for o in outputs]
                   + [tf.convert_to_tensor(g).numpy() for g in grads])
  # The fused forms really ran in the model built with them, and none in the other.
  assert any("residual_layer_norm_forward" in name for name in compiled[0]), compiled[0]
  assert compiled[1] == set()
  return results[0], results[1], len(outputs)


def _assert_same(on, off, num_outputs):
  assert len(on) == len(off)
  for a, b in zip(on[:num_outputs], off[:num_outputs]):
    np.testing.assert_allclose(a, b, atol=1e-5)
  for a, b in zip(on[num_outputs:], off[num_outputs:]):
    np.testing.assert_allclose(a, b, **_GRADIENT_TOLERANCE)


_TINY = dict(vocab_size=60, hidden_size=16, num_layers=2, num_attention_heads=2,
             intermediate_size=32, max_position_embeddings=24)


def _encoder_inputs(batch=3, length=12, predictions=None):
  rng = np.random.default_rng(0)
  inputs = {"input_word_ids": tf.constant(rng.integers(1, 60, (batch, length)), tf.int32),
            "input_mask": tf.constant([[1] * length, [1] * 8 + [0] * (length - 8),
                                       [1] * 10 + [0] * (length - 10)][:batch], tf.int32),
            "input_type_ids": tf.constant(rng.integers(0, 2, (batch, length)), tf.int32)}
  if predictions:
    inputs["masked_lm_positions"] = tf.constant(rng.integers(0, 8, (batch, predictions)),
                                                tf.int32)
  return inputs


@pytest.mark.parametrize("dropout", [False, True])
@pytest.mark.parametrize("query_positions", [None, [[0, 3], [1, 5]]])
def test_transformer_block_is_the_same_with_fused_kernels_on_and_off(
    monkeypatch, dropout, query_positions):
  keras.utils.set_random_seed(3)
  rate = 0.3 if dropout else 0.0

  def build(kernels):
    return layers.TransformerBlock(hidden_size=16, num_heads=2, intermediate_size=32,
                                   dropout_rate=rate, attention_dropout_rate=rate,
                                   kernels=kernels)
  bias = layers.attention_mask_bias(tf.constant([[1] * 6, [1] * 4 + [0] * 2]))
  positions = None if query_positions is None else tf.constant(query_positions)

  def call(block, x, training=False):
    return block(x, bias, training=training, query_positions=positions)

  x = tf.random.normal([2, 6, 16])
  on, off, n = _run_both_ways(build, call, x, monkeypatch, dropout)
  _assert_same(on, off, n)
  if dropout:  # dropout was active: the outputs differ from those without it
    assert not np.allclose(on[0], call(build(None), x).numpy(), atol=1e-3)


def test_bfloat16_transformer_block_is_the_same_with_fused_kernels_on_and_off(monkeypatch):
  """Under mixed_bfloat16 the block's ends run fused too (in float32, as the reference's
  sum and LayerNorm): outputs and gradients agree to bf16's rounding, 2^-6 of each
  array's largest magnitude (the reference adds the bias and drops in bf16), or of
  1e-3 for the key bias, whose gradient is zero but for rounding."""
  keras.utils.set_random_seed(6)

  def build(kernels):
    return layers.TransformerBlock(hidden_size=16, num_heads=2, intermediate_size=32,
                                   dropout_rate=0.3, attention_dropout_rate=0.3,
                                   kernels=kernels, dtype="mixed_bfloat16")
  bias = layers.attention_mask_bias(tf.constant([[1] * 6, [1] * 4 + [0] * 2]))

  def call(block, x, training=False):
    return block(x, bias, training=training)

  x = tf.cast(tf.random.normal([2, 6, 16]), tf.bfloat16)
  on, off, _ = _run_both_ways(build, call, x, monkeypatch, dropout=True)
  assert on[0].dtype == off[0].dtype == tf.bfloat16.as_numpy_dtype
  for a, b in zip(on, off):
    a, b = a.astype(np.float32), b.astype(np.float32)
    np.testing.assert_allclose(a, b, atol=2 ** -6 * max(np.abs(b).max(), 1e-3))


@pytest.mark.parametrize("dropout", [False, True])
def test_encoder_is_the_same_with_fused_kernels_on_and_off(monkeypatch, dropout):
  keras.utils.set_random_seed(4)
  rate = 0.2 if dropout else 0.0

  def build(kernels):
    return BertEncoder(**_TINY, dropout_rate=rate, attention_dropout_rate=rate,
                       kernels=kernels)

  def call(encoder, inputs, training=False):
    outputs = encoder(inputs, training=training)
    return [outputs["sequence_output"], outputs["pooled_output"]]

  _assert_same(*_run_both_ways(build, call, _encoder_inputs(), monkeypatch, dropout))


@pytest.mark.parametrize("dropout", [False, True])
def test_pretrainer_is_the_same_with_fused_kernels_on_and_off(monkeypatch, dropout):
  keras.utils.set_random_seed(5)
  rate = 0.2 if dropout else 0.0

  def build(kernels):
    return BertPretrainer(BertEncoder(**_TINY, dropout_rate=rate,
                                      attention_dropout_rate=rate, kernels=kernels))

  def call(model, inputs, training=False):
    outputs = model(inputs, training=training)
    return [outputs["mlm_logits"], outputs["next_sentence_logits"]]

  inputs = _encoder_inputs(predictions=4)
  _assert_same(*_run_both_ways(build, call, inputs, monkeypatch, dropout))


@pytest.mark.parametrize("fused_kernels,expected", [(False, None), (True, hooks.KERNELS),
                                                    (None, hooks.KERNELS)])
def test_the_trainer_builds_its_model_with_runtime_fused_kernels(tmp_path, fused_kernels,
                                                                 expected):
  from bert_tf.training.trainer import Trainer  # pylint: disable=g-import-not-at-top
  import trainer_helpers  # pylint: disable=g-import-not-at-top
  experiment = trainer_helpers.tiny_experiment().override(
      {"runtime": {"fused_kernels": fused_kernels}})
  trainer = Trainer(experiment, model_dir=str(tmp_path))
  assert trainer.model.encoder.kernels is expected
  assert trainer.model.masked_lm.kernels is expected
  block = trainer.model.encoder.transformer_layers[0]
  assert block.kernels is expected and block.attention.kernels is expected
  # On a CPU the step is not XLA-compiled unless asked for.
  assert trainer.engine.jit_compile is False


def test_where_tensorflow_sees_a_gpu_the_cpu_kernels_are_off_and_the_step_is_compiled(
    tmp_path, monkeypatch):
  from bert_tf.training.trainer import Trainer  # pylint: disable=g-import-not-at-top
  import trainer_helpers  # pylint: disable=g-import-not-at-top
  real = tf.config.list_logical_devices

  def with_a_gpu(device_type=None):
    if device_type == "GPU":
      return [tf.config.LogicalDevice("/device:GPU:0", "GPU")]
    return real(device_type)

  monkeypatch.setattr(tf.config, "list_logical_devices", with_a_gpu)
  assert kernels.tensorflow_sees_accelerators()
  trainer = Trainer(trainer_helpers.tiny_experiment(), model_dir=str(tmp_path))
  assert trainer.model.encoder.kernels is None
  assert trainer.engine.jit_compile is True
  # An explicit setting wins over the device.
  forced = trainer_helpers.tiny_experiment().override(
      {"runtime": {"fused_kernels": True, "jit_compile": False}})
  trainer = Trainer(forced, model_dir=str(tmp_path / "forced"))
  assert trainer.model.encoder.kernels is hooks.KERNELS
  assert trainer.engine.jit_compile is False
