"""Element-wise pieces of the encoder compiled by XLA when their shapes are static.

TensorFlow runs an unfused LayerNorm, GELU or softmax cross-entropy as a handful of
kernels, each a pass over memory; XLA fuses each into one or two loops, forward and
backward. XLA compiles once per input shape, so the compiled path is taken only where
the shape is fully known when the step is traced (pretraining batches of a fixed length,
drop_remainder): a batch padded to its longest example, whose length changes from step
to step, would compile again for every new length and takes the plain path instead.
The matmuls stay outside, where TensorFlow's oneDNN kernels beat XLA's on CPU.

Each piece is two XLA functions, forward and backward, joined by a custom gradient;
the backward recomputes what it needs from the forward's inputs. Differentiated by
TensorFlow instead, a compiled forward also writes out every intermediate its gradient
reads (three or four more tensors of the input's size): bias + GELU ran twice as slow
(bench/README.md, "Levers"). The pieces: LayerNorm; GELU and bias + GELU; and the end
of each half of a Transformer block, LayerNorm(residual + Dropout(x + bias)), given the
dropout layer's random bits.
"""

import math

import tensorflow as tf

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def static(*tensors) -> bool:
  """Whether the compiled path applies: inside a traced function (eager calls run one
  op at a time anyway) and with every tensor's shape fully known."""
  if tf.executing_eagerly():
    return False
  return all(isinstance(t, tf.Tensor) and t.shape.is_fully_defined() for t in tensors)


def _rows(x):
  """float [..., H] -> [N, H]."""
  return tf.reshape(x, [-1, x.shape[-1]])


def _normalize(x, epsilon):
  """(x - mean) / std over the last axis and 1 / std, as keras.ops.layer_normalization
  computes them (float [..., H] -> float [..., H], float [..., 1])."""
  mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
  inv_std = tf.math.rsqrt(variance + epsilon)
  return (x - mean) * inv_std, inv_std


def _layer_norm_formula(x, gamma, beta, epsilon):
  # The formula of keras.ops.layer_normalization, so both paths agree to rounding.
  mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
  inv = tf.math.rsqrt(variance + epsilon) * gamma
  return x * inv + (beta - mean * inv)


_layer_norm_forward = tf.function(_layer_norm_formula, jit_compile=True)


def _layer_norm_backward_body(dy, x, gamma, epsilon):
  """dy, x: float [N, H] (XLA's CPU reductions over two or more leading axes run at
  half the speed of one)."""
  normalized, inv_std = _normalize(x, epsilon)
  d_gamma = tf.reduce_sum(dy * normalized, axis=0)
  d_beta = tf.reduce_sum(dy, axis=0)
  d_normalized = dy * gamma
  d_x = inv_std * (d_normalized
                   - tf.reduce_mean(d_normalized, axis=-1, keepdims=True)
                   - normalized * tf.reduce_mean(d_normalized * normalized, axis=-1,
                                                 keepdims=True))
  return d_x, d_gamma, d_beta


_layer_norm_backward = tf.function(_layer_norm_backward_body, jit_compile=True)


def layer_norm(x, gamma, beta, epsilon: float):
  """LayerNorm over the last axis, XLA-compiled forward and backward.

  Args:
    x: float32 [..., H]; gamma, beta: float32 [H].

  Returns:
    float32 [..., H].
  """
  epsilon = tf.constant(epsilon, x.dtype)

  @tf.custom_gradient
  def normalize(x, gamma, beta):
    def grad(dy):
      d_x, d_gamma, d_beta = _layer_norm_backward(_rows(dy), _rows(x), gamma, epsilon)
      return tf.reshape(d_x, tf.shape(x)), d_gamma, d_beta
    return _layer_norm_forward(x, gamma, beta, epsilon), grad

  return normalize(x, gamma, beta)


@tf.function(jit_compile=True)
def _gelu_forward(x):
  return tf.nn.gelu(x, approximate=False)


@tf.function(jit_compile=True)
def _bias_gelu_forward(x, bias):
  return tf.nn.gelu(x + bias, approximate=False)


def _gelu_derivative(z):
  """d gelu(z) / dz = Phi(z) + z phi(z), with Phi, phi the standard normal's CDF, PDF."""
  return (0.5 * (1.0 + tf.math.erf(z * _SQRT_HALF))
          + z * tf.exp(-0.5 * tf.square(z)) * _INV_SQRT_2PI)


@tf.function(jit_compile=True)
def _gelu_backward(dy, x):
  return dy * _gelu_derivative(x)


@tf.function(jit_compile=True)
def _bias_gelu_backward(dy, x, bias):
  """dy, x: float [N, I]; bias: float [I]. The bias gradient sums in float32 (for
  bfloat16 inputs too)."""
  d_z = dy * _gelu_derivative(x + bias)
  return d_z, tf.cast(tf.reduce_sum(tf.cast(d_z, tf.float32), axis=0), bias.dtype)


@tf.custom_gradient
def gelu(x):
  """The exact (erf) GELU, XLA-compiled: float [...] -> float [...]."""
  return _gelu_forward(x), lambda dy: _gelu_backward(dy, x)


@tf.custom_gradient
def bias_gelu(x, bias):
  """gelu(x + bias) with the exact GELU, XLA-compiled; the bias gradient comes out of
  the same fused loop as the input gradient. float [..., N], [N] -> float [..., N]."""

  def grad(dy):
    d_x, d_bias = _bias_gelu_backward(_rows(dy), _rows(x), bias)
    return tf.reshape(d_x, tf.shape(x)), d_bias

  return _bias_gelu_forward(x, bias), grad


def _dropped(x, bits, threshold, scale):
  return tf.where(bits >= threshold, x * scale, tf.zeros([], x.dtype))


def _residual_sum(x, bias, residual, bits, threshold, scale):
  summand = x + bias
  if bits is not None:
    summand = _dropped(summand, bits, threshold, scale)
  return residual + summand


@tf.function(jit_compile=True)
def _residual_layer_norm_forward(x, bias, residual, bits, threshold, scale, gamma, beta,
                                 epsilon):
  return _layer_norm_formula(_residual_sum(x, bias, residual, bits, threshold, scale),
                             gamma, beta, epsilon)


@tf.function(jit_compile=True)
def _residual_layer_norm_backward(dy, x, bias, residual, bits, threshold, scale, gamma,
                                  epsilon):
  """All of [N, H] but bias, gamma [H]."""
  total = _residual_sum(x, bias, residual, bits, threshold, scale)
  d_total, d_gamma, d_beta = _layer_norm_backward_body(dy, total, gamma, epsilon)
  d_x = d_total if bits is None else _dropped(d_total, bits, threshold, scale)
  return d_x, tf.reduce_sum(d_x, axis=0), d_total, d_gamma, d_beta


def residual_layer_norm(x, bias, residual, gamma, beta, epsilon: float, dropout=None):
  """LayerNorm(residual + Dropout(x + bias)), the end of each half of a Transformer
  block, as one XLA function forward and one backward.

  Args:
    x: float32 [..., H], a projection's output before its bias; bias: float32 [H].
    residual: float32 [..., H], the block's input to this half.
    gamma, beta: float32 [H], the LayerNorm's scale and offset.
    epsilon: the LayerNorm's epsilon.
    dropout: None (no dropout) or (bits, threshold, scale) from
      bert_tf.layers.Dropout.keep_bits, bits uint16 [..., H].

  Returns:
    float32 [..., H].
  """
  shape = tf.shape(x)
  epsilon = tf.constant(epsilon, x.dtype)
  bits, threshold, scale = (None, None, None) if dropout is None else dropout
  bits = None if bits is None else _rows(bits)

  @tf.custom_gradient
  def fused(x, bias, residual, gamma, beta):  # x, residual: [N, H]
    def grad(dy):
      return _residual_layer_norm_backward(dy, x, bias, residual, bits, threshold, scale,
                                           gamma, epsilon)
    return _residual_layer_norm_forward(x, bias, residual, bits, threshold, scale, gamma,
                                        beta, epsilon), grad

  return tf.reshape(fused(_rows(x), bias, _rows(residual), gamma, beta), shape)

