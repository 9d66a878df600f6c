"""The TensorFlow CPU speed path of the encoder and its heads.

The layers in bert_tf.layers are written as the paper reads, with Keras layers and
keras.ops, and run on every Keras backend. A model built with `kernels=KERNELS` (see
bert_tf.kernels) hands some of its layers' calls to the functions here: same variables,
same checkpoints, same result to rounding, computed faster by TensorFlow on a CPU. The
choice is made when the model is built (`runtime.fused_kernels`, by default on where
TensorFlow runs the model on a CPU and nowhere else); nothing process-wide changes.

The pieces, each used only where it applies:
- XLA-compiled element-wise pieces, where every shape is static and the computation is
  float32 (`applies`): LayerNorm; bias + exact GELU; and the end of each half of a
  Transformer block, LayerNorm(residual + Dropout(x + bias)), given the dropout mask.
  TensorFlow runs each of these as a handful of kernels, each a pass over memory; XLA
  fuses each into one or two loops. XLA compiles once per input shape, so a batch
  padded to its longest example (a new length every step) takes the plain path. Each
  piece is two XLA functions, forward and backward, joined by a custom gradient: the
  backward recomputes what it needs from the forward's inputs, where a compiled forward
  differentiated by TensorFlow would write out every intermediate its gradient reads.
  The matmuls stay outside, where TensorFlow's oneDNN kernels beat XLA's on CPU.
- The widening matmul of the intermediate layer (static shapes): its input gradient
  multiplies by a materialized transposed kernel, which oneDNN runs faster than the
  same product with transpose_b.
- Dropout masks of 16 random bits per element drawn from a named Philox stream
  (`keep_bits`), everywhere: Keras draws a float32 uniform per element with the
  "auto_select" algorithm, twice the random bits needed, and under XLA on CPU
  "auto_select" compiles to a much slower generator than naming Philox. Keep
  probabilities are multiples of 1/2^16: rate 0.1 drops with probability
  6554/65536 = 0.100006, and kept values are scaled by the exact 1/keep probability.
- The masked-LM logits as one 2-D matmul against the transposed table with a BiasAdd,
  which TensorFlow fuses into a single oneDNN kernel, the bias gradient a BiasAddGrad
  instead of a broadcast reduction over [B, P, V].
"""

import math

import keras
import tensorflow as tf

from bert_tf import constants
from bert_tf import losses
from bert_tf.kernels import protocol
from bert_tf.layers import initializers

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
    dropout: None (no dropout) or (bits, threshold, scale) from `keep_bits`, bits
      uint16 [..., H].

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
    scalar at or above which an element is kept, and the float scale of kept ones.
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
          tf.constant(_LEVELS / (_LEVELS - threshold), inputs.dtype))


# --------------------------------------------------------------------------------------
# The hooks (bert_tf.kernels.protocol): each returns what the reference computes, to
# rounding (and with other dropout masks: `keep_bits` instead of Keras's).

def _autocast(layer, x):
  """x as a layer's __call__ hands it to `call`: floats in the layer's compute dtype."""
  dtype = tf.as_dtype(layer.compute_dtype)
  if layer.autocast and x.dtype.is_floating and x.dtype != dtype:
    return tf.cast(x, dtype)
  return x


def dropout(layer, x, training):
  """The keras.layers.Dropout `layer` applied to x with a `keep_bits` mask."""
  if layer.noise_shape is not None:
    return layer(x, training=training)
  x = _autocast(layer, x)
  mask = keep_bits(layer, x, training)
  if mask is None:
    return x
  return _dropped(x, *mask)


def normalized(layer, x):
  """The keras.layers.LayerNormalization `layer` (last axis, centered and scaled)
  applied to x, XLA-compiled where that applies to float32 x."""
  x = _autocast(layer, x)
  if applies(x) and x.dtype == tf.float32:
    return layer_norm(x, tf.convert_to_tensor(layer.gamma), tf.convert_to_tensor(layer.beta),
                      layer.epsilon)
  return layer(x)


def dense(layer, inputs):
  """The keras.layers.Dense `layer` applied to inputs [..., I]: a widening layer's
  input gradient through `widening_matmul`, and the exact GELU
  (bert_tf.layers.initializers.exact_gelu) joined with the bias in one XLA function."""
  if protocol.dense_computes_itself(layer):
    return layer(inputs)
  inputs = _autocast(layer, inputs)
  kernel = tf.cast(layer.kernel, layer.compute_dtype)
  features = kernel.shape[0]
  # Static shapes only: the custom gradient adds IdentityN ops that exported signatures
  # (dynamic batch) must not carry.
  if layer.units > features and applies(inputs):
    x = tf.reshape(widening_matmul(tf.reshape(inputs, [-1, features]), kernel),
                   tf.concat([tf.shape(inputs)[:-1], [layer.units]], axis=0))
  else:
    x = keras.ops.matmul(inputs, kernel)
  if layer.bias is None:
    return x if layer.activation is None else layer.activation(x)
  bias = tf.cast(layer.bias, x.dtype)
  if layer.activation is initializers.exact_gelu and applies(x):
    return bias_gelu(x, bias)
  x = keras.ops.add(x, bias)
  return x if layer.activation is None else layer.activation(x)


def project_residual_layer_norm(dense_layer, x, residual, dropout_layer, layer_norm_layer,
                                training):
  """layer_norm(residual + dropout(dense(x))) as `residual_layer_norm` computes it:
  float32 x [B, Q, I], residual [B, Q, H] -> float32 [B, Q, H].

  A quantized or LoRA `dense_layer` computes its output, bias included, through its own
  call; the fused function then adds a zero bias."""
  if protocol.dense_computes_itself(dense_layer):
    projected = dense_layer(x)
    bias = tf.zeros([dense_layer.units], projected.dtype)
  else:
    projected = tf.reshape(
        tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), dense_layer.kernel),
        tf.concat([tf.shape(x)[:-1], [dense_layer.units]], axis=0))
    bias = tf.convert_to_tensor(dense_layer.bias)
  return residual_layer_norm(
      projected, bias, residual,
      tf.convert_to_tensor(layer_norm_layer.gamma),
      tf.convert_to_tensor(layer_norm_layer.beta), layer_norm_layer.epsilon,
      dropout=keep_bits(dropout_layer, projected, training))


# --------------------------------------------------------------------------------------
# The masked-LM loss.

_compiled_pretraining_loss = tf.function(losses.pretraining_loss, jit_compile=True)
_LOSS_FEATURES = (constants.MASKED_LM_IDS, constants.MASKED_LM_WEIGHTS,
                  constants.NEXT_SENTENCE_LABELS)


class TensorFlowCpuKernels(protocol.Kernels):
  """The TensorFlow CPU speed path (bert_tf.kernels.protocol.Kernels)."""

  name = "tensorflow_cpu"

  def dropout(self, layer, x, training):
    return dropout(layer, x, training)

  def layer_norm(self, layer, x):
    return normalized(layer, x)

  def dense(self, layer, x):
    return dense(layer, x)

  def residual_layer_norm(self, dense, x, residual, dropout, layer_norm, training):  # pylint: disable=redefined-outer-name
    """In float32 with static shapes, the output bias, dropout, residual add and
    LayerNorm are one XLA function forward and one backward (`residual_layer_norm`),
    with the same dropout masks as the unfused form."""
    if x.dtype == tf.float32 and residual.dtype == tf.float32 and applies(x, residual):
      return project_residual_layer_norm(dense, x, residual, dropout, layer_norm, training)
    return super().residual_layer_norm(dense, x, residual, dropout, layer_norm, training)

  def vocabulary_logits(self, hidden, table, bias):
    """One 2-D matmul against the transposed table and a BiasAdd, which TensorFlow
    fuses into one oneDNN kernel."""
    shape = tf.shape(hidden)
    logits = tf.matmul(tf.reshape(hidden, [-1, table.shape[-1]]), table, transpose_b=True)
    logits = tf.nn.bias_add(logits, bias)
    return tf.reshape(logits, tf.concat([shape[:-1], [table.shape[0]]], axis=0))

  def loss(self, loss_fn, features, outputs, **kwargs):
    """bert_tf.losses.pretraining_loss, with static shapes in a traced step: the softmax
    cross-entropy over the [B, P, V] logits, forward and backward, as two XLA loops
    instead of TensorFlow's kernel and its temporaries."""
    if loss_fn is not losses.pretraining_loss or not applies(outputs[constants.MLM_LOGITS]):
      return loss_fn(features, outputs, **kwargs)
    features = {k: features[k] for k in _LOSS_FEATURES if k in features}
    return _compiled_pretraining_loss(features, outputs, **kwargs)

  def __repr__(self):
    return "bert_tf.kernels.tensorflow_cpu.KERNELS"


KERNELS = TensorFlowCpuKernels()
