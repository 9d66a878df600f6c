"""Word, position and segment embeddings, summed, then LayerNorm and dropout."""

import keras
import numpy as np
from keras import ops

from bert_tf.kernels import protocol
from bert_tf.layers import initializers

# Tables of at most this many rows (token types) are looked up as a one-hot product, as
# the original BERT always did for them. A lookup's gradient is a scatter-add of one
# [H] row per token into the table: into a 2-row table on a GPU, B x T atomic adds onto
# the same 2 x H addresses, which serialize (35 of 90 ms of a BERT-large step on an
# H100). The product's gradient is a [R, B*T] x [B*T, H] matmul instead. Its cost, R x H
# multiply-adds per token forward and as many backward, is R/H of one H x H projection:
# under 2% at R = 16 and H = 1024, under 13% of one of the 6+ projections per layer at
# H = 128. Larger tables (words, positions) spread their updates over many rows and
# keep the gather.
ONE_HOT_MAX_ROWS = 16


def lookup_rows(table, ids):
  """Rows of `table` [R, H] at int `ids` [...]: [..., H] in the table's dtype.

  A table of at most ONE_HOT_MAX_ROWS rows multiplies one-hot rows [N, R] by the
  table (exact: one nonzero product per output); larger ones are gathered. Ids must
  lie in [0, R); a one-hot row of an id outside is all zeros.
  """
  rows, width = table.shape
  if rows > ONE_HOT_MAX_ROWS:
    return ops.take(table, ids, axis=0)
  # The one-hot rows as a comparison with 0..R-1 (Equal and Cast, ops every serving
  # runtime has; XLA lowers it as it lowers one_hot).
  flat = ops.reshape(ids, (-1, 1))
  one_hot = ops.cast(ops.equal(flat, ops.arange(rows, dtype=flat.dtype)[None]),
                     table.dtype)
  return ops.reshape(ops.matmul(one_hot, table),
                     tuple(ops.shape(ids)) + (width,))


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEmbeddings(keras.layers.Layer):
  """The BERT input embedding layer.

  Call arguments:
    input_word_ids: int [B, T].
    input_type_ids: int [B, T].
    training: whether dropout is active.
    position_ids: optional int [B, T], each token's position; default 0..T-1 in every
      row. Packed rows restart the positions at every example.

  Returns:
    float [B, T, H] in the layer's compute dtype.

  Token types (a table of at most ONE_HOT_MAX_ROWS rows) are looked up as a one-hot
  product, words and positions by a gather (`lookup_rows`).

  The word-embedding table `word_embeddings` [V, H] is the same variable that the
  masked-LM head multiplies with to produce vocabulary logits (through
  `word_embedding_values`). `quantize("int8")` stores it as int8 with one scale per row,
  for serving.

  The LayerNorm and the dropout are the `layer_norm` and `dropout` hooks of `kernels`
  (bert_tf.kernels.protocol; None: the reference computations).
  """

  def __init__(self, vocab_size: int, hidden_size: int, max_position_embeddings: int = 512,
               type_vocab_size: int = 2, dropout_rate: float = 0.1,
               initializer_range: float = 0.02, layer_norm_epsilon: float = 1e-12,
               kernels=None, **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.max_position_embeddings = max_position_embeddings
    self.type_vocab_size = type_vocab_size
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    self.layer_norm_epsilon = layer_norm_epsilon
    self.kernels = kernels
    # LayerNorm statistics are computed in float32 under mixed precision.
    self.layer_norm = keras.layers.LayerNormalization(
        epsilon=layer_norm_epsilon, axis=-1, dtype="float32", name="layer_norm")
    self.dropout = keras.layers.Dropout(dropout_rate, name="dropout",
                                        dtype=self.dtype_policy)

  def build(self, input_shape=None):
    init = initializers.bert_initializer(self.initializer_range)
    self.word_embeddings = self.add_weight(
        name="word_embeddings", shape=(self.vocab_size, self.hidden_size), initializer=init)
    self.position_embeddings = self.add_weight(
        name="position_embeddings", shape=(self.max_position_embeddings, self.hidden_size),
        initializer=init)
    self.token_type_embeddings = self.add_weight(
        name="token_type_embeddings", shape=(self.type_vocab_size, self.hidden_size),
        initializer=init)
    self.layer_norm.build((None, None, self.hidden_size))
    self.built = True

  @property
  def word_embeddings_quantized(self) -> bool:
    return self.word_embeddings.dtype == "int8"

  def quantize(self, mode=None, type_check=True, config=None):
    """Stores the word-embedding table as int8 [V, H] with one float32 scale per row
    (`word_embeddings_scale` [V], the row's absmax / 127): a quarter of its float32
    size, the largest part of a quantized encoder's. Position and segment tables
    (P + 2 rows) stay float32. For serving: the int8 table no longer trains.

    Keras's Model.quantize skips this layer (it has sublayers); bert_tf's exporter
    calls it. Keras's wrapper of `quantize` resolves `mode`/`config` and opens the layer
    to new variables while it runs.
    """
    del type_check, config  # One scheme: per-row absmax, as Keras quantizes Embedding.
    if mode != "int8":
      raise NotImplementedError(f"{self.name}: only int8 quantization, got mode={mode!r}")
    if self.word_embeddings_quantized:
      raise ValueError(f"{self.name}: the word embeddings are already int8")
    table = ops.convert_to_numpy(self.word_embeddings).astype(np.float32)
    absmax = np.abs(table).max(axis=1)
    scale = np.where(absmax > 0, absmax / 127.0, 1.0).astype(np.float32)
    values = np.clip(np.round(table / scale[:, None]), -127, 127).astype(np.int8)
    del self.word_embeddings
    self.word_embeddings = self.add_weight(
        name="word_embeddings", shape=values.shape, initializer="zeros", dtype="int8",
        trainable=False)
    self.word_embeddings_scale = self.add_weight(
        name="word_embeddings_scale", shape=scale.shape, initializer="ones",
        dtype="float32", trainable=False)
    self.word_embeddings.assign(values)
    self.word_embeddings_scale.assign(scale)

  def word_embedding_values(self, dtype):
    """The [V, H] word-embedding table in `dtype` (dequantized when it is int8)."""
    if not self.word_embeddings_quantized:
      return ops.cast(self.word_embeddings, dtype)
    table = ops.cast(self.word_embeddings, "float32") * self.word_embeddings_scale[:, None]
    return ops.cast(table, dtype)

  def _lookup_words(self, input_word_ids):
    """Rows of the word-embedding table for int ids [B, T]: [B, T, H]."""
    words = ops.take(self.word_embeddings, input_word_ids, axis=0)
    if not self.word_embeddings_quantized:
      return words
    scale = ops.take(self.word_embeddings_scale, input_word_ids, axis=0)
    return ops.cast(ops.cast(words, "float32") * scale[..., None], self.compute_dtype)

  def call(self, input_word_ids, input_type_ids, training=None, position_ids=None):
    words = self._lookup_words(input_word_ids)
    types = lookup_rows(ops.cast(self.token_type_embeddings, self.compute_dtype),
                        input_type_ids)
    if position_ids is None:
      # A slice broadcast over the batch: no [B, T, H] gather on the common path.
      seq_length = ops.shape(input_word_ids)[1]
      positions = self.position_embeddings[:seq_length][None]
    else:
      positions = lookup_rows(self.position_embeddings, position_ids)
    summed = ops.cast(words + types, "float32") + ops.cast(positions, "float32")
    kernels = self.kernels or protocol.REFERENCE
    normalized = kernels.layer_norm(self.layer_norm, summed)
    return kernels.dropout(self.dropout, ops.cast(normalized, self.compute_dtype), training)

  def compute_output_shape(self, input_word_ids_shape, input_type_ids_shape=None,
                           position_ids_shape=None):
    return tuple(input_word_ids_shape) + (self.hidden_size,)

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size, hidden_size=self.hidden_size,
                  max_position_embeddings=self.max_position_embeddings,
                  type_vocab_size=self.type_vocab_size, dropout_rate=self.dropout_rate,
                  initializer_range=self.initializer_range,
                  layer_norm_epsilon=self.layer_norm_epsilon)
    return config
