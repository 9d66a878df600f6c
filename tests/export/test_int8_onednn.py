"""The int8_onednn product (bert_tf.export.int8_onednn): oneDNN's int8 matmul on
uint8 rows scaled by their own maximum, equal to the product of the quantized operands,
close to the float product, and each row independent of the others."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.export import int8_onednn


def _operands(rows=6, inputs=48, outputs=20, shift=0.0, seed=0):
  """x [rows, inputs], the float kernel W, its int8 K and scale s (per output channel,
  K in int8_onednn.KERNEL_RANGE), column sums and a bias."""
  rng = np.random.default_rng(seed)
  x = (rng.normal(size=(rows, inputs)) + shift).astype(np.float32)
  weights = (rng.normal(size=(inputs, outputs)) * 0.05).astype(np.float32)
  scale = (int8_onednn.KERNEL_RANGE[1] / np.abs(weights).max(axis=0)).astype(np.float32)
  kernel = np.round(weights * scale).astype(np.int8)
  bias = rng.normal(size=outputs).astype(np.float32)
  return x, weights, kernel, scale, kernel.astype(np.float32).sum(axis=0), bias


def _product(x, kernel, scale, sums, bias):
  return int8_onednn.int8_product(tf.constant(x), tf.constant(kernel), tf.constant(scale),
                                  tf.constant(sums), tf.constant(bias)).numpy()


def test_onednn_int8_product_runs_here():
  int8_onednn.check_available()


@pytest.mark.parametrize("shift", [0.0, 3.0, -3.0])
def test_product_is_the_product_of_the_quantized_operands_and_close_to_float(shift):
  x, weights, kernel, scale, sums, bias = _operands(shift=shift)
  got = _product(x, kernel, scale, sums, bias)
  # The same product computed from the quantized operands in NumPy: each row scaled to
  # [-1, 1] by its absolute maximum and rounded to one of 256 levels (QuantizeV2's
  # MIN_FIRST over [-1, 1]), times K / s.
  row_max = np.abs(x).max(axis=1, keepdims=True)
  quantized, low, high = (t.numpy() for t in tf.raw_ops.QuantizeV2(
      input=x / row_max, min_range=-1.0, max_range=1.0, T=tf.quint8, mode="MIN_FIRST"))
  levels = quantized.astype(np.float32)
  dequantized = row_max * (low + levels * (high - low) / 255.0)
  np.testing.assert_allclose(got, dequantized @ (kernel / scale) + bias, rtol=1e-4,
                             atol=1e-4)
  # Against the float product: half an input step per element and the kernel's rounding.
  want = x @ weights + bias
  assert np.abs(got - want).max() < 0.02 * np.abs(want).max()


def test_each_row_is_computed_as_if_alone():
  x, _, kernel, scale, sums, bias = _operands(rows=8)
  x[3] *= 50.0  # An outlier row sets its own scale only.
  together = _product(x, kernel, scale, sums, bias)
  for row in range(len(x)):
    alone = _product(x[row:row + 1], kernel, scale, sums, bias)
    np.testing.assert_allclose(together[row:row + 1], alone, rtol=1e-6, atol=1e-6)


def test_a_zero_row_gives_the_bias():
  x, _, kernel, scale, sums, bias = _operands(rows=3)
  x[1] = 0.0
  np.testing.assert_allclose(_product(x, kernel, scale, sums, bias)[1], bias, atol=1e-6)


def test_a_converted_dense_layer_keeps_its_weights_and_computes_in_int8():
  layer = keras.layers.Dense(20, activation="relu")
  layer.build((None, None, 48))
  x = np.random.default_rng(1).normal(size=(2, 5, 48)).astype(np.float32)
  want = layer(x).numpy()
  layer.quantize("int8", config=keras.quantizers.Int8QuantizationConfig(
      weight_quantizer=int8_onednn.weight_quantizer(), activation_quantizer=None))
  kernel = layer._kernel.numpy()  # pylint: disable=protected-access
  assert np.abs(kernel).max() == int8_onednn.KERNEL_RANGE[1]
  int8_onednn.convert(layer)
  assert isinstance(layer, int8_onednn.OneDnnInt8Dense)
  assert layer.quantization_mode == "int8"
  np.testing.assert_array_equal(layer._kernel.numpy(), kernel)  # pylint: disable=protected-access
  np.testing.assert_array_equal(layer.column_sums.numpy(), kernel.astype(np.float32).sum(0))
  assert "column_sums" in [w.name for w in layer.weights]
  got = tf.function(layer)(tf.constant(x)).numpy()
  assert got.shape == (2, 5, 20)
  assert np.abs(got - want).max() < 0.03 * np.abs(want).max()


def test_convert_refuses_a_layer_without_int8_weights():
  layer = keras.layers.Dense(4)
  layer.build((None, 3))
  with pytest.raises(ValueError, match="int8 weights"):
    int8_onednn.convert(layer)


def test_convert_refuses_kernels_beyond_the_range_no_pair_of_products_overflows():
  layer = keras.layers.Dense(4)
  layer.build((None, 3))
  layer.quantize("int8")  # Keras's default: up to 127.
  with pytest.raises(ValueError, match="beyond"):
    int8_onednn.convert(layer)
