"""The TensorFlow CPU speed path's XLA-compiled pieces
(bert_tf.kernels.tensorflow_cpu.fused): each equals, in value and gradients, the plain
TensorFlow composition it replaces. Tolerance: 1e-5 (float32)."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.kernels.tensorflow_cpu import fused


def _value_and_grads(fn, args, output_gradient):
  """fn(*args) and its gradients with respect to every arg, in one traced function
  (static shapes, so the compiled functions apply)."""

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
  compiled = _value_and_grads(lambda *a: fused.layer_norm(*a, 1e-12), (x, gamma, beta), dy)
  plain = _value_and_grads(_plain_layer_norm, (x, gamma, beta), dy)
  _assert_all_close(compiled, plain)


@pytest.mark.parametrize("shape", [(4, 24), (2, 3, 24)])
def test_bias_gelu_and_its_gradients_equal_tensorflows_exact_gelu(shape):
  tf.random.set_seed(1)
  x, bias, dy = tf.random.normal(shape) * 3.0, tf.random.normal(shape[-1:]), tf.random.normal(shape)
  exact = lambda x: tf.nn.gelu(x, approximate=False)
  _assert_all_close(_value_and_grads(fused.bias_gelu, (x, bias), dy),
                    _value_and_grads(lambda x, b: exact(x + b), (x, bias), dy))


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
  compiled = _value_and_grads(
      lambda *a: fused.residual_layer_norm(*a, 1e-12, dropout=dropout), args, dy)
  _assert_all_close(compiled, _value_and_grads(plain, args, dy))
  if with_dropout:
    # Dropped elements pass no gradient to x; the residual gets all of it.
    dropped = (dropout[0] < dropout[1]).numpy()
    assert dropped.any()
    np.testing.assert_array_equal(compiled[1][dropped], 0.0)


def test_bfloat16_residual_layer_norm_computes_in_float32_and_returns_bfloat16():
  """A bf16 block's end: x and residual bf16, the bias, LayerNorm and their gradients
  float32; the sum and LayerNorm computed in float32 on the bf16 values, only the
  output and the gradients of x and residual rounded to bf16."""
  tf.random.set_seed(3)
  x, residual, dy = (tf.cast(tf.random.normal([2, 6, 16]), tf.bfloat16) for _ in range(3))
  bias, gamma, beta = (tf.random.normal([16]) for _ in range(3))
  bits = tf.cast(tf.random.uniform([2, 6, 16], 0, 1 << 16, tf.int32), tf.uint16)
  dropout = (bits, tf.constant(6554, tf.uint16), tf.constant(65536 / (65536 - 6554)))

  def in_float32(x, bias, residual, gamma, beta):
    summand = tf.where(bits >= dropout[1], (x + bias) * dropout[2], 0.0)
    return _plain_layer_norm(residual + summand, gamma, beta)

  compiled = _value_and_grads(
      lambda *a: fused.residual_layer_norm(*a, 1e-12, dropout=dropout),
      (x, bias, residual, gamma, beta), dy)
  as_float32 = [tf.cast(t, tf.float32) for t in (x, bias, residual, gamma, beta)]
  expected = _value_and_grads(in_float32, as_float32, tf.cast(dy, tf.float32))
  dtypes = [a.dtype for a in compiled]
  assert dtypes == [tf.bfloat16.as_numpy_dtype, tf.bfloat16.as_numpy_dtype, np.float32,
                    tf.bfloat16.as_numpy_dtype, np.float32, np.float32], dtypes
  for actual, reference, dtype in zip(compiled, expected, dtypes):
    # bf16 keeps 8 significant bits; the float32 gradients are the same sums.
    tolerance = 2 ** -7 if dtype != np.float32 else 1e-5
    np.testing.assert_allclose(actual.astype(np.float32), reference, rtol=tolerance,
                               atol=tolerance)
