"""The kernel protocol: the pieces of the encoder and its heads that a speed path computes
its own way, with their reference computations.

The layers (bert_tf.layers) are written once. Each takes `kernels=`, a Kernels object,
and calls its hooks at its hot spots; `kernels=None` is REFERENCE, this class itself,
which computes as the paper reads with the layers' own Keras sublayers and keras.ops.
A speed path subclasses Kernels and overrides the hooks it computes faster (same
variables, same results to rounding, other dropout masks):

  dropout               every Dropout of the model (the mask generator)
  layer_norm            every LayerNormalization outside a block's residual ends
  dense                 a Dense layer with its activation: the feed-forward's widening
                        layer and the masked-LM transform (bias + GELU)
  attention             between the projections of SelfAttention (scores, softmax,
                        dropout, weighted values)
  residual_layer_norm   the end of each half of a Transformer block: output
                        projection, dropout, residual sum, LayerNorm
  vocabulary_logits     the masked-LM head's product with the tied word embeddings
  loss                  a loss of the model's outputs (bert_tf.losses)

The hooks receive the calling layer's Keras sublayers (keras.layers.Dense, Dropout,
LayerNormalization) and read only their public attributes (kernel, bias, activation,
units, gamma, beta, epsilon, rate, noise_shape, seed_generator, compute_dtype).

Imports Keras and no other bert_tf module: the layers import it.
"""

import math

import keras
from keras import ops


def exact_gelu(x):
  """GELU with the normal CDF (erf), the activation "gelu" names (the paper's and the
  released checkpoints'): a speed path recognizes it by identity
  (`dense.activation is exact_gelu`)."""
  return keras.activations.gelu(x, approximate=False)


def dense_computes_itself(dense) -> bool:
  """Whether the keras.layers.Dense `dense` must compute through its own call, not as a
  product with its kernel: a quantized layer has no float kernel, and a LoRA layer adds
  its adapters' product."""
  return bool(dense.lora_enabled or dense.quantization_mode)


def attention_probabilities(query, key, attention_bias):
  """softmax(Q K^T / sqrt(D) + bias) per head: query [B, Q, N, D], key [B, T, N, D]
  (the heads as the projections' reshape leaves them), attention_bias float32
  [B, 1, 1 or Q, T] -> [B, N, Q, T] in the query's dtype (the softmax in float32)."""
  query = ops.transpose(query, (0, 2, 1, 3))
  query = query * ops.cast(1.0 / math.sqrt(query.shape[-1]), query.dtype)
  scores = ops.matmul(query, ops.transpose(key, (0, 2, 3, 1)))  # [B, N, Q, T]
  # Softmax in float32: float16 logits plus the mask bias would lose precision.
  scores = ops.cast(scores, "float32") + ops.cast(attention_bias, "float32")
  return ops.cast(ops.softmax(scores, axis=-1), query.dtype)


def weighted_values(probs, value):
  """probs [B, N, Q, T] times value [B, T, N, D], the heads concatenated: [B, Q, N * D]."""
  heads, head_size = value.shape[-2], value.shape[-1]
  context = ops.transpose(ops.matmul(probs, ops.transpose(value, (0, 2, 1, 3))),
                          (0, 2, 1, 3))
  batch, length = ops.shape(context)[0], ops.shape(context)[1]
  return ops.reshape(context, (batch, length, heads * head_size))


class Kernels:
  """The hooks the layers call, computed as the reference layers compute them.

  Subclass it and override what a speed path replaces; `name` names the path.
  """

  name = "reference"

  def dropout(self, layer, x, training):
    """The keras.layers.Dropout `layer` applied to x (in the layer's compute dtype);
    advances the layer's seed generator once when it drops."""
    return layer(x, training=training)

  def layer_norm(self, layer, x):
    """The keras.layers.LayerNormalization `layer` applied to float32 x [..., H]."""
    return layer(x)

  def dense(self, layer, x):
    """The keras.layers.Dense `layer` (its bias and activation included) applied to x
    [..., I]: [..., units] in its compute dtype."""
    return layer(x)

  def attention(self, query, key, value, attention_bias, dropout, training):
    """Scaled dot-product attention between SelfAttention's projections.

    Args:
      query: [B, Q, N, D]; key, value: [B, T, N, D] (split by a reshape, not
        transposed), in the compute dtype.
      attention_bias: float32 [B, 1, 1, T] (padding) or [B, 1, Q, T] (packed rows).
      dropout: the keras.layers.Dropout of the attention probabilities.
      training: whether dropout is active.

    Returns:
      [B, Q, N * D], the heads' weighted values concatenated.
    """
    probs = self.dropout(dropout, attention_probabilities(query, key, attention_bias),
                         training)
    return weighted_values(probs, value)

  def residual_layer_norm(self, dense, x, residual, dropout, layer_norm, training):
    """layer_norm(residual + dropout(dense(x))), the end of each half of a Transformer
    block, the sum and the LayerNorm in float32.

    Args:
      dense: the half's output projection (keras.layers.Dense, no activation).
      x: [B, Q, I], its input; residual: [B, Q, H], the half's input.
      dropout, layer_norm: the half's keras.layers.Dropout and LayerNormalization.

    Returns:
      [B, Q, H] in residual's dtype.
    """
    projected = self.dropout(dropout, dense(x), training)
    total = ops.cast(residual, "float32") + ops.cast(projected, "float32")
    return ops.cast(self.layer_norm(layer_norm, total), residual.dtype)

  def vocabulary_logits(self, hidden, table, bias):
    """hidden [B, P, H] times the transposed word-embedding table [V, H], plus bias [V],
    all in one dtype: logits [B, P, V]."""
    return ops.matmul(hidden, ops.transpose(table)) + bias

  def loss(self, loss_fn, features, outputs, **kwargs):
    """loss_fn(features, outputs, **kwargs), a loss of bert_tf.losses."""
    return loss_fn(features, outputs, **kwargs)

  def __repr__(self):
    return f"bert_tf.kernels.{self.name}"


REFERENCE = Kernels()
