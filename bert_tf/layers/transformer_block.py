"""The post-LayerNorm Transformer block of BERT."""

import keras

from bert_tf.kernels import protocol
from bert_tf.layers import initializers
from bert_tf.layers.gather import gather_positions
from bert_tf.layers.self_attention import SelfAttention


@keras.saving.register_keras_serializable(package="bert_tf")
class TransformerBlock(keras.layers.Layer):
  """Self-attention and a feed-forward network, each followed by add and LayerNorm.

  out1 = LayerNorm(x + Dropout(Attention(x)))
  out  = LayerNorm(out1 + Dropout(Dense_H(GELU(Dense_I(out1)))))

  Call arguments:
    hidden_states: float [B, T, H].
    attention_bias: float32 [B, 1, 1, T].
    training: whether dropout is active.
    query_positions: optional int [B, Q]: compute the block's output only at these
      positions (every position still serves as a key and value). A last block needs
      no more than the positions its heads read.

  Returns:
    float [B, T, H] in the compute dtype, or [B, Q, H] with query_positions.

  The block is composed of the hooks of `kernels` (bert_tf.kernels.protocol; None: the
  reference computations): `attention` inside SelfAttention, `residual_layer_norm` at
  the end of each half, `dense` for the widening layer and its GELU. A speed path
  computes those pieces its own way; the composition is this one.
  """

  def __init__(self, hidden_size: int, num_heads: int, intermediate_size: int,
               hidden_activation: str = "gelu", dropout_rate: float = 0.1,
               attention_dropout_rate: float = 0.1, initializer_range: float = 0.02,
               layer_norm_epsilon: float = 1e-12, kernels=None, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.num_heads = num_heads
    self.intermediate_size = intermediate_size
    self.hidden_activation = hidden_activation
    self.dropout_rate = dropout_rate
    self.attention_dropout_rate = attention_dropout_rate
    self.initializer_range = initializer_range
    self.layer_norm_epsilon = layer_norm_epsilon
    self.kernels = kernels
    init = initializers.bert_initializer(initializer_range)

    self.attention = SelfAttention(
        num_heads=num_heads, hidden_size=hidden_size,
        attention_dropout_rate=attention_dropout_rate, initializer_range=initializer_range,
        name="attention", dtype=self.dtype_policy, kernels=kernels)
    self.attention_dropout = keras.layers.Dropout(dropout_rate, name="attention_dropout",
                                                  dtype=self.dtype_policy)
    self.attention_layer_norm = keras.layers.LayerNormalization(
        epsilon=layer_norm_epsilon, dtype="float32", name="attention_layer_norm")
    self.intermediate = keras.layers.Dense(
        intermediate_size, activation=initializers.activation_fn(hidden_activation),
        kernel_initializer=init, name="intermediate", dtype=self.dtype_policy)
    self.output_dense = keras.layers.Dense(
        hidden_size, kernel_initializer=init, name="output", dtype=self.dtype_policy)
    self.output_dropout = keras.layers.Dropout(dropout_rate, name="output_dropout",
                                               dtype=self.dtype_policy)
    self.output_layer_norm = keras.layers.LayerNormalization(
        epsilon=layer_norm_epsilon, dtype="float32", name="output_layer_norm")

  def build(self, input_shape):
    shape = (None, None, self.hidden_size)
    self.attention.build(shape)
    self.attention_layer_norm.build(shape)
    self.intermediate.build(shape)
    self.output_dense.build((None, None, self.intermediate_size))
    self.output_layer_norm.build(shape)
    self.built = True

  def call(self, hidden_states, attention_bias, training=None, query_positions=None):
    queries = hidden_states
    if query_positions is not None:
      queries = gather_positions(hidden_states, query_positions)
    kernels = self.kernels or protocol.REFERENCE
    context = self.attention.context(hidden_states, attention_bias, training=training,
                                     query_states=queries)
    out1 = kernels.residual_layer_norm(self.attention.output_dense, context, queries,
                                       self.attention_dropout, self.attention_layer_norm,
                                       training)
    inner = kernels.dense(self.intermediate, out1)
    return kernels.residual_layer_norm(self.output_dense, inner, out1, self.output_dropout,
                                       self.output_layer_norm, training)

  def compute_output_shape(self, hidden_states_shape, attention_bias_shape=None,
                           query_positions_shape=None):
    if query_positions_shape is not None:
      return tuple(query_positions_shape) + (self.hidden_size,)
    return tuple(hidden_states_shape)

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                  intermediate_size=self.intermediate_size,
                  hidden_activation=self.hidden_activation, dropout_rate=self.dropout_rate,
                  attention_dropout_rate=self.attention_dropout_rate,
                  initializer_range=self.initializer_range,
                  layer_norm_epsilon=self.layer_norm_epsilon)
    return config
