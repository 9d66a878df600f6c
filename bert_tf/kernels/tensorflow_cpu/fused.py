"""The TensorFlow CPU speed path's pieces as functions of tensors: XLA-compiled
LayerNorm, bias + exact GELU and residual + dropout + LayerNorm, each with its own
backward; the widening matmul; the 16-bit dropout masks (`keep_bits`). Why each one:
bert_tf.kernels.tensorflow_cpu."""

import math

import tensorflow as tf

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
# Dropout keep decisions compare 16 random bits with a threshold.
_LEVELS = 1 << 16

def applies(*tensors) -> bool:
  """Whether the XLA-compiled pieces apply: the call is being traced (eager calls run
  one op at a time anyway) and every tensor's shape is fully known."""
  if tf.executing_eagerly():
    return False
  return all(isinstance(t, tf.Tensor) and t.shape.is_fully_defined() for t in tensors)


# --------------------------------------------------------------------------------------
# XLA-compiled element-wise pieces.

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
  """dy, x: float [N, H] (XLA's CPU reductions over two or more leading axes are
  slower than over one)."""
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
def _bias_gelu_forward(x, bias):
  return tf.nn.gelu(x + bias, approximate=False)


def _gelu_derivative(z):
  """d gelu(z) / dz = Phi(z) + z phi(z), with Phi, phi the standard normal's CDF, PDF."""
  return (0.5 * (1.0 + tf.math.erf(z * _SQRT_HALF))
          + z * tf.exp(-0.5 * tf.square(z)) * _INV_SQRT_2PI)


@tf.function(jit_compile=True)
def _bias_gelu_backward(dy, x, bias):
  """dy, x: float [N, I]; bias: float [I]. The bias gradient sums in float32 (for
  bfloat16 inputs too)."""
  d_z = dy * _gelu_derivative(x + bias)
  return d_z, tf.cast(tf.reduce_sum(tf.cast(d_z, tf.float32), axis=0), bias.dtype)


@tf.custom_gradient
def bias_gelu(x, bias):
  """gelu(x + bias) with the exact GELU, XLA-compiled; the bias gradient comes out of
  the same fused loop as the input gradient. float [..., N], [N] -> float [..., N]."""

  def grad(dy):
    d_x, d_bias = _bias_gelu_backward(_rows(dy), _rows(x), bias)
    return tf.reshape(d_x, tf.shape(x)), d_bias

  return _bias_gelu_forward(x, bias), grad


def dropped(x, bits, threshold, scale):
  """x with the elements whose bits are below threshold zeroed, the others times
  scale (a float32 scalar, taken in x's dtype)."""
  return tf.where(bits >= threshold, x * tf.cast(scale, x.dtype), tf.zeros([], x.dtype))


def _residual_sum(x, bias, residual, bits, threshold, scale):
  """residual + dropout(x + bias) in float32, whatever the dtype of x and residual."""
  summand = tf.cast(x, tf.float32) + bias
  if bits is not None:
    summand = dropped(summand, bits, threshold, scale)
  return tf.cast(residual, tf.float32) + summand


@tf.function(jit_compile=True)
def _residual_layer_norm_forward(x, bias, residual, bits, threshold, scale, gamma, beta,
                                 epsilon):
  total = _residual_sum(x, bias, residual, bits, threshold, scale)
  return tf.cast(_layer_norm_formula(total, gamma, beta, epsilon), residual.dtype)


@tf.function(jit_compile=True)
def _residual_layer_norm_backward(dy, x, bias, residual, bits, threshold, scale, gamma,
                                  epsilon):
  """All of [N, H] but bias, gamma [H]; computed in float32, the gradients of x and
  residual returned in their dtypes."""
  total = _residual_sum(x, bias, residual, bits, threshold, scale)
  d_total, d_gamma, d_beta = _layer_norm_backward_body(tf.cast(dy, tf.float32), total,
                                                       gamma, epsilon)
  d_x = d_total if bits is None else dropped(d_total, bits, threshold, scale)
  return (tf.cast(d_x, x.dtype), tf.reduce_sum(d_x, axis=0),
          tf.cast(d_total, residual.dtype), d_gamma, d_beta)


def residual_layer_norm(x, bias, residual, gamma, beta, epsilon: float, dropout=None):
  """LayerNorm(residual + Dropout(x + bias)), the end of each half of a Transformer
  block, as one XLA function forward and one backward, computed in float32 (a bf16
  block's sum and LayerNorm too, as Keras's mixed precision computes its LayerNorm).

  Args:
    x: float32 or bfloat16 [..., H], a projection's output before its bias;
      bias: float32 [H].
    residual: float32 or bfloat16 [..., H], the block's input to this half.
    gamma, beta: float32 [H], the LayerNorm's scale and offset.
    epsilon: the LayerNorm's epsilon.
    dropout: None (no dropout) or (bits, threshold, scale) from `keep_bits`, bits
      uint16 [..., H].

  Returns:
    [..., H] in residual's dtype.
  """
  shape = tf.shape(x)
  epsilon = tf.constant(epsilon, tf.float32)
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


# --------------------------------------------------------------------------------------
# The widening matmul and the dropout mask.

@tf.function(jit_compile=True)
def _transpose(kernel):
  # Compiled on its own so that grappler cannot fold it back into a transposed matmul.
  return tf.transpose(kernel)


@tf.custom_gradient
def widening_matmul(x, kernel):
  """x [N, I] @ kernel [I, O] with O > I, whose input gradient multiplies by a
  materialized kernel^T rather than with transpose_b."""

  def grad(dy):
    return (tf.matmul(dy, _transpose(kernel)),
            tf.matmul(x, dy, transpose_a=True))

  return tf.matmul(x, kernel), grad


def keep_bits(dropout, inputs, training):
  """The random bits of a dropout mask, advancing the seed generator of `dropout`
  (a keras.layers.Dropout) once, as one of its calls does.

  Returns:
    None where the layer would return its inputs unchanged (not training, rate 0);
    otherwise (bits, threshold, scale): uint16 bits shaped like inputs, the uint16
    scalar at or above which an element is kept, and the float32 scale of kept ones.
  """
  if dropout.noise_shape is not None:
    raise ValueError(f"{dropout.name}: keep_bits draws one bit per element; this layer "
                     f"has noise_shape {dropout.noise_shape}")
  if not training or dropout.rate == 0:
    return None
  threshold = min(int(round(dropout.rate * _LEVELS)), _LEVELS - 1)
  if threshold == 0:
    return None
  # The generator's int64 state, folded into int32 as keras.random does.
  seed = tf.cast(tf.math.floormod(dropout.seed_generator.next(), tf.int32.max - 1),
                 tf.int32)
  shape = tf.shape(inputs)
  size = tf.size(inputs)
  words = tf.random.stateless_uniform([(size + 1) // 2], seed, minval=None, maxval=None,
                                      dtype=tf.uint32, alg="philox")
  bits = tf.reshape(tf.bitcast(words, tf.uint16), [-1])
  if inputs.shape.num_elements() is None or inputs.shape.num_elements() % 2:
    bits = bits[:size]
  return (tf.reshape(bits, shape), tf.constant(threshold, tf.uint16),
          tf.constant(_LEVELS / (_LEVELS - threshold), tf.float32))
