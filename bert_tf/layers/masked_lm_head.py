"""The masked-LM head, tied to the word-embedding table."""

import keras
from keras import ops

from bert_tf.kernels import protocol
from bert_tf.layers import initializers
from bert_tf.layers.gather import gather_positions


@keras.saving.register_keras_serializable(package="bert_tf")
class MaskedLMHead(keras.layers.Layer):
  """Predicts the original token at each masked position.

  dense(H) -> activation -> LayerNorm -> matmul with the transposed word-embedding
  table (the very variable of `embedding_layer`) -> + output bias. Evaluated only at
  the gathered positions, never over the whole sequence.

  Call arguments:
    sequence_output: float [B, T, H].
    masked_lm_positions: int [B, P]; None when sequence_output holds the [B, P, H]
      vectors at the masked positions already.

  Returns:
    logits [B, P, V] in the compute dtype.

  The head is built by a model that owns the embedding layer; it cannot be restored
  from its config alone because the tied table belongs to that model. The transform,
  its LayerNorm and the product with the table are the `dense`, `layer_norm` and
  `vocabulary_logits` hooks of `kernels` (bert_tf.kernels.protocol; None: the
  reference computations).
  """

  def __init__(self, embedding_layer, activation: str = "gelu",
               initializer_range: float = 0.02, layer_norm_epsilon: float = 1e-12,
               kernels=None, **kwargs):
    super().__init__(**kwargs)
    self.embedding_layer = embedding_layer
    self.kernels = kernels
    self.activation = activation
    self.initializer_range = initializer_range
    self.layer_norm_epsilon = layer_norm_epsilon
    self.vocab_size = embedding_layer.vocab_size
    self.hidden_size = embedding_layer.hidden_size
    self.transform = keras.layers.Dense(
        self.hidden_size, activation=initializers.activation_fn(activation),
        kernel_initializer=initializers.bert_initializer(initializer_range),
        name="transform", dtype=self.dtype_policy)
    self.transform_layer_norm = keras.layers.LayerNormalization(
        epsilon=layer_norm_epsilon, dtype="float32", name="transform_layer_norm")

  def build(self, sequence_output_shape, masked_lm_positions_shape=None):
    if not self.embedding_layer.built:
      self.embedding_layer.build(None)
    self.transform.build((None, None, self.hidden_size))
    self.transform_layer_norm.build((None, None, self.hidden_size))
    self.output_bias = self.add_weight(
        name="output_bias", shape=(self.vocab_size,), initializer="zeros")
    self.built = True

  @property
  def embedding_table(self):
    """The tied [V, H] word-embedding variable."""
    return self.embedding_layer.word_embeddings

  def call(self, sequence_output, masked_lm_positions=None):
    hidden = sequence_output
    if masked_lm_positions is not None:
      hidden = gather_positions(sequence_output, masked_lm_positions)
    return self.logits(hidden)

  def logits(self, hidden):
    """The vocabulary logits [B, P, V] (compute dtype) of the gathered float [B, P, H]."""
    kernels = self.kernels or protocol.REFERENCE
    hidden = kernels.dense(self.transform, hidden)
    hidden = kernels.layer_norm(self.transform_layer_norm, ops.cast(hidden, "float32"))
    hidden = ops.cast(hidden, self.compute_dtype)
    table = self.embedding_layer.word_embedding_values(self.compute_dtype)
    return kernels.vocabulary_logits(hidden, table,
                                     ops.cast(self.output_bias, self.compute_dtype))

  def compute_output_shape(self, sequence_output_shape, masked_lm_positions_shape=None):
    if masked_lm_positions_shape is None:
      return tuple(sequence_output_shape[:-1]) + (self.vocab_size,)
    return tuple(masked_lm_positions_shape) + (self.vocab_size,)

  def get_config(self):
    config = super().get_config()
    config.update(activation=self.activation, initializer_range=self.initializer_range,
                  layer_norm_epsilon=self.layer_norm_epsilon)
    return config

  @classmethod
  def from_config(cls, config):
    raise TypeError("MaskedLMHead shares the word-embedding table of its model; "
                    "restore the model that owns it (BertPretrainer) instead.")
