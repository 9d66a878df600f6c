"""The XLA-fused element-wise pieces (bert_tf.layers.fusion): each forward and gradient
equals the plain TensorFlow composition it replaces."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import layers
from bert_tf.layers import fusion


def _value_and_grads(fn, args, output_gradient):
  """fn(*args) and its gradients with respect to every arg, in one traced function
  (static shapes, so the fused paths apply)."""

  @tf.function
  def run(*args):
    with tf.GradientTape() as tape:
      tape.watch(args)
      y = fn(*args)
    return [y] + tape.gradient(y, list(args), output_gradients=output_gradient)

  return [t.numpy() for t in run(*args)]


def _assert_all_close(actual, expected, rtol=1e-5, atol=1e-5):
  assert len(actual) == len(expected)
  for a, b in zip(actual, expected):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def _plain_layer_norm(x, gamma, beta, epsilon=1e-12):
  mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
  return (x - mean) * tf.math.rsqrt(variance + epsilon) * gamma + beta


def test_layer_norm_value_and_gradients_equal_the_plain_formula():
  tf.random.set_seed(0)
  x = tf.random.normal([3, 5, 16]) * 4.0 + 2.0
  gamma, beta = tf.random.normal([16]), tf.random.normal([16])
  dy = tf.random.normal([3, 5, 16])
  fused = _value_and_grads(lambda *a: fusion.layer_norm(*a, 1e-12), (x, gamma, beta), dy)
  plain = _value_and_grads(_plain_layer_norm, (x, gamma, beta), dy)
  _assert_all_close(fused, plain)


@pytest.mark.parametrize("shape", [(4, 24), (2, 3, 24)])
def test_bias_gelu_and_gelu_gradients_equal_tensorflows_exact_gelu(shape):
  tf.random.set_seed(1)
  x, bias, dy = tf.random.normal(shape) * 3.0, tf.random.normal(shape[-1:]), tf.random.normal(shape)
  exact = lambda x: tf.nn.gelu(x, approximate=False)
  _assert_all_close(_value_and_grads(fusion.bias_gelu, (x, bias), dy),
                    _value_and_grads(lambda x, b: exact(x + b), (x, bias), dy))
  _assert_all_close(_value_and_grads(fusion.gelu, (x,), dy),
                    _value_and_grads(exact, (x,), dy))


@pytest.mark.parametrize("with_dropout", [False, True])
def test_residual_layer_norm_equals_bias_dropout_residual_then_layer_norm(with_dropout):
  tf.random.set_seed(2)
  x, residual = tf.random.normal([2, 6, 16]), tf.random.normal([2, 6, 16])
  bias, gamma, beta = (tf.random.normal([16]) for _ in range(3))
  dy = tf.random.normal([2, 6, 16])
  dropout = None
  if with_dropout:
    bits = tf.random.uniform([2, 6, 16], 0, 1 << 16, tf.int32)
    dropout = (tf.cast(bits, tf.uint16), tf.constant(6554, tf.uint16),
               tf.constant(65536 / (65536 - 6554)))

  def plain(x, bias, residual, gamma, beta):
    summand = x + bias
    if dropout is not None:
      bits, threshold, scale = dropout
      summand = tf.where(bits >= threshold, summand * scale, 0.0)
    return _plain_layer_norm(residual + summand, gamma, beta)

  args = (x, bias, residual, gamma, beta)
  fused = _value_and_grads(
      lambda *a: fusion.residual_layer_norm(*a, 1e-12, dropout=dropout), args, dy)
  _assert_all_close(fused, _value_and_grads(plain, args, dy))
  if with_dropout:
    # Dropped elements pass no gradient to x; the residual gets all of it.
    dropped = (dropout[0] < dropout[1]).numpy()
    assert dropped.any()
    np.testing.assert_array_equal(fused[1][dropped], 0.0)


def test_dropout_keep_bits_is_the_mask_its_call_applies():
  x = tf.random.normal([8, 32])
  drawn = layers.Dropout(0.1, seed=5)
  bits, threshold, scale = drawn.keep_bits(x, training=True)
  applied = layers.Dropout(0.1, seed=5)(x, training=True)
  np.testing.assert_allclose(applied, tf.where(bits >= threshold, x * scale, 0.0))
  assert drawn.keep_bits(x, training=False) is None
  assert layers.Dropout(0.0).keep_bits(x, training=True) is None
  with pytest.raises(ValueError, match="noise_shape"):
    layers.Dropout(0.1, noise_shape=(8, 1)).keep_bits(x, training=True)


@pytest.mark.parametrize("query_positions", [None, [[0, 3], [1, 5]]])
def test_transformer_block_fused_path_equals_the_plain_one_with_the_same_masks(
    monkeypatch, query_positions):
  keras.utils.set_random_seed(3)
  block = layers.TransformerBlock(hidden_size=16, num_heads=2, intermediate_size=32,
                                  dropout_rate=0.3, attention_dropout_rate=0.3)
  x = tf.random.normal([2, 6, 16])
  bias = layers.attention_mask_bias(tf.constant([[1] * 6, [1] * 4 + [0] * 2]))
  positions = None if query_positions is None else tf.constant(query_positions)
  block(x, bias)
  seed_states = [v.numpy() for v in block.non_trainable_variables]

  def run(training):
    @tf.function
    def step(x):
      with tf.GradientTape() as tape:
        tape.watch(x)
        y = block(x, bias, training=training, query_positions=positions)
        loss = tf.reduce_sum(y * tf.sin(tf.range(16, dtype=tf.float32)))
      return [y] + tape.gradient(loss, [x] + block.trainable_variables)

    out = [t.numpy() for t in step(x)]
    for variable, state in zip(block.non_trainable_variables, seed_states):
      variable.assign(state)  # the next run draws the same dropout masks
    return out

  fused = run(training=True)
  assert not np.allclose(fused[0], run(training=False)[0])  # dropout is active
  with monkeypatch.context() as patch:
    patch.setattr(fusion, "static", lambda *tensors: False)
    plain = run(training=True)
  _assert_all_close(fused, plain, atol=2e-5)
