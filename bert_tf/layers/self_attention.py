"""Multi-head self-attention with the padding mask applied in float32."""

import keras
from keras import ops

from bert_tf.kernels import protocol
from bert_tf.layers import initializers

# The additive bias at padded key positions, as in the original release. exp(-10000)
# underflows to exactly 0 in float32, so padded keys get no weight at all.
MASK_BIAS = -10000.0


def attention_mask_bias(input_mask):
  """Turns a padding mask into an additive attention bias.

  Args:
    input_mask: int or bool [B, T], 1 at real tokens.

  Returns:
    float32 [B, 1, 1, T]: 0 at real keys, MASK_BIAS at padding.
  """
  mask = ops.cast(input_mask, "float32")
  return (1.0 - mask)[:, None, None, :] * MASK_BIAS


def packed_attention_bias(example_ids, query_example_ids=None):
  """The block-diagonal attention bias of rows that pack several examples.

  A query sees a key iff both belong to the same example, so each packed example
  attends exactly as it would alone.

  Args:
    example_ids: int [B, T], each token's example (1, 2, ... within a row), 0 at
      padding.
    query_example_ids: optional int [B, Q], the queries' example ids when the queries
      are a subset of the positions; default example_ids.

  Returns:
    float32 [B, 1, Q, T]: 0 where query and key share an example, MASK_BIAS elsewhere
    (padding keys included).
  """
  if query_example_ids is None:
    query_example_ids = example_ids
  keys = example_ids[:, None, None, :]
  same = ops.logical_and(ops.equal(query_example_ids[:, None, :, None], keys), keys > 0)
  return (1.0 - ops.cast(same, "float32")) * MASK_BIAS


@keras.saving.register_keras_serializable(package="bert_tf")
class SelfAttention(keras.layers.Layer):
  """Scaled dot-product self-attention over `num_heads` heads.

  Call arguments:
    hidden_states: float [B, T, H], the keys' and values' source.
    attention_bias: float32 [B, 1, 1, T] from `attention_mask_bias`, or [B, 1, Q, T]
      from `packed_attention_bias`.
    training: whether attention-probability dropout is active.
    query_states: optional float [B, Q, H], the queries' source; default hidden_states
      (self-attention proper). A subset of hidden_states' rows gives those rows' output.

  Returns:
    float [B, Q, H] (Q = T by default): the attention output projected back to H
    (before the residual).

  The query, key, value and output kernels are [H, H], as in the original checkpoints.
  Between the projections, softmax(Q K^T / sqrt(D) + bias) V per head is the `attention`
  hook of `kernels` (bert_tf.kernels.protocol; None: the reference computation), which
  receives the heads as [B, T, N, D].
  """

  def __init__(self, num_heads: int, hidden_size: int, attention_dropout_rate: float = 0.1,
               initializer_range: float = 0.02, kernels=None, **kwargs):
    super().__init__(**kwargs)
    if hidden_size % num_heads:
      raise ValueError(f"hidden_size ({hidden_size}) must be divisible by num_heads "
                       f"({num_heads})")
    self.num_heads = num_heads
    self.hidden_size = hidden_size
    self.head_size = hidden_size // num_heads
    self.attention_dropout_rate = attention_dropout_rate
    self.initializer_range = initializer_range
    self.kernels = kernels

    def dense(name):
      return keras.layers.Dense(
          hidden_size, kernel_initializer=initializers.bert_initializer(initializer_range),
          name=name, dtype=self.dtype_policy)

    self.query = dense("query")
    self.key = dense("key")
    self.value = dense("value")
    self.output_dense = dense("output")
    # In the layer's policy, so that P.V multiplies in the compute dtype.
    self.dropout = keras.layers.Dropout(attention_dropout_rate, name="dropout",
                                        dtype=self.dtype_policy)

  def build(self, input_shape):
    for layer in (self.query, self.key, self.value, self.output_dense):
      layer.build((None, None, self.hidden_size))
    self.built = True

  def split_heads(self, x):
    """[B, T, H] -> [B, T, N, D] (a reshape: the heads stay where the projection put
    them)."""
    batch, seq = ops.shape(x)[0], ops.shape(x)[1]
    return ops.reshape(x, (batch, seq, self.num_heads, self.head_size))

  def call(self, hidden_states, attention_bias, training=None, query_states=None):
    return self.output_dense(self.context(hidden_states, attention_bias, training=training,
                                          query_states=query_states))

  def context(self, hidden_states, attention_bias, training=None, query_states=None):
    """The heads' attention-weighted values, concatenated: float [B, Q, H], what the
    output projection (`output_dense`) multiplies. Arguments as for `call`."""
    if query_states is None:
      query_states = hidden_states
    query = self.split_heads(self.query(query_states))
    key = self.split_heads(self.key(hidden_states))
    value = self.split_heads(self.value(hidden_states))
    kernels = self.kernels or protocol.REFERENCE
    return kernels.attention(query, key, value, attention_bias, self.dropout, training)

  def compute_output_shape(self, hidden_states_shape, attention_bias_shape=None,
                           query_states_shape=None):
    return tuple(query_states_shape or hidden_states_shape)

  def get_config(self):
    config = super().get_config()
    config.update(num_heads=self.num_heads, hidden_size=self.hidden_size,
                  attention_dropout_rate=self.attention_dropout_rate,
                  initializer_range=self.initializer_range)
    return config
