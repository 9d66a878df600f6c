"""The TensorFlow CPU speed path's hooks (bert_tf.kernels.protocol.Kernels): the
pieces of bert_tf.kernels.tensorflow_cpu.fused applied to the layers' Keras sublayers.
Each returns what the reference hook computes, to rounding (and with other dropout
masks: `fused.keep_bits` instead of Keras's)."""

import keras
import tensorflow as tf

from bert_tf import constants
from bert_tf import losses
from bert_tf.kernels import protocol
from bert_tf.kernels.tensorflow_cpu import fused

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
  mask = fused.keep_bits(layer, x, training)
  if mask is None:
    return x
  return fused.dropped(x, *mask)


def normalized(layer, x):
  """The keras.layers.LayerNormalization `layer` (last axis, centered and scaled)
  applied to x, XLA-compiled where that applies to float32 x."""
  x = _autocast(layer, x)
  if fused.applies(x) and x.dtype == tf.float32:
    return fused.layer_norm(x, tf.convert_to_tensor(layer.gamma),
                            tf.convert_to_tensor(layer.beta), layer.epsilon)
  return layer(x)


def dense(layer, inputs):
  """The keras.layers.Dense `layer` applied to inputs [..., I]: a widening layer's
  input gradient through `widening_matmul`, and the exact GELU
  (bert_tf.kernels.protocol.exact_gelu) joined with the bias in one XLA function (with
  dynamic shapes, a bf16 layer's bias and GELU in float32)."""
  if protocol.dense_computes_itself(layer):
    return layer(inputs)
  inputs = _autocast(layer, inputs)
  kernel = tf.cast(layer.kernel, layer.compute_dtype)
  features = kernel.shape[0]
  # Static shapes only: the custom gradient adds IdentityN ops that exported signatures
  # (dynamic batch) must not carry.
  if layer.units > features and fused.applies(inputs):
    x = tf.reshape(fused.widening_matmul(tf.reshape(inputs, [-1, features]), kernel),
                   tf.concat([tf.shape(inputs)[:-1], [layer.units]], axis=0))
  else:
    x = keras.ops.matmul(inputs, kernel)
  if layer.bias is None:
    return x if layer.activation is None else layer.activation(x)
  bias = tf.cast(layer.bias, x.dtype)
  if layer.activation is protocol.exact_gelu and fused.applies(x):
    return fused.bias_gelu(x, bias)
  if layer.activation is protocol.exact_gelu and x.dtype == tf.bfloat16:
    # TensorFlow's CPU Erfc has no vectorized bf16 kernel: in a bf16 export (dynamic
    # shapes, no XLA) the GELU took 5x its float32 time, more than the casts cost.
    summed = tf.cast(x, tf.float32) + tf.cast(layer.bias, tf.float32)
    return tf.cast(protocol.exact_gelu(summed), x.dtype)
  x = keras.ops.add(x, bias)
  return x if layer.activation is None else layer.activation(x)


def project_residual_layer_norm(dense_layer, x, residual, dropout_layer, layer_norm_layer,
                                training):
  """layer_norm(residual + dropout(dense(x))) as `fused.residual_layer_norm` computes it:
  x [B, Q, I], residual [B, Q, H], both float32 or both bfloat16 -> [B, Q, H] in
  their dtype (the projection in that dtype, the rest in float32).

  A quantized or LoRA `dense_layer` computes its output, bias included, through its own
  call; the fused function then adds a zero bias."""
  if protocol.dense_computes_itself(dense_layer):
    projected = dense_layer(x)
    bias = tf.zeros([dense_layer.units], tf.float32)
  else:
    projected = tf.reshape(
        tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), tf.cast(dense_layer.kernel, x.dtype)),
        tf.concat([tf.shape(x)[:-1], [dense_layer.units]], axis=0))
    # A mixed-precision layer reads its bias in the compute dtype, as Keras's Dense adds it.
    bias = tf.cast(dense_layer.bias, tf.float32)
  return fused.residual_layer_norm(
      projected, bias, residual,
      tf.convert_to_tensor(layer_norm_layer.gamma),
      tf.convert_to_tensor(layer_norm_layer.beta), layer_norm_layer.epsilon,
      dropout=fused.keep_bits(dropout_layer, projected, training))


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
    """In float32 or bfloat16 with static shapes, the output bias, dropout, residual add
    and LayerNorm are one XLA function forward and one backward, in float32
    (`fused.residual_layer_norm`), with the same dropout masks as the unfused form."""
    if (x.dtype == residual.dtype and x.dtype in (tf.float32, tf.bfloat16)
        and fused.applies(x, residual)):
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
    if (loss_fn is not losses.pretraining_loss
        or not fused.applies(outputs[constants.MLM_LOGITS])):
      return loss_fn(features, outputs, **kwargs)
    features = {k: features[k] for k in _LOSS_FEATURES if k in features}
    return _compiled_pretraining_loss(features, outputs, **kwargs)

  def __repr__(self):
    return "bert_tf.kernels.tensorflow_cpu.hooks.KERNELS"


KERNELS = TensorFlowCpuKernels()
