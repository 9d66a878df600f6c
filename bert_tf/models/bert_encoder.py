"""The BERT encoder: embeddings, a stack of Transformer blocks, and the [CLS] pooler."""

import types
from typing import Optional

import keras
from keras import ops

from bert_tf import configs
from bert_tf import constants
from bert_tf.layers import initializers
from bert_tf.layers.embeddings import BertEmbeddings
from bert_tf.layers.self_attention import attention_mask_bias, packed_attention_bias
from bert_tf.layers.transformer_block import TransformerBlock


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEncoder(keras.Model):
  """BERT as in Devlin et al. (2018), with the input and output names of TF Hub encoders.

  Inputs (a dict):
    input_word_ids: int32 [B, T] WordPiece ids.
    input_mask: int32 [B, T], 1 at real tokens, 0 at padding.
    input_type_ids: int32 [B, T] segment ids (0 for A, 1 for B).
  T may vary from batch to batch, up to max_position_embeddings.

  Outputs (a dict):
    sequence_output: float32 [B, T, H], the last layer.
    pooled_output: float [B, H], tanh(dense(sequence_output[:, 0])).
    encoder_outputs: a list of num_layers float [B, T, H], each block's output.

  Two more entry points compute only the positions heads read, to the same values:
  `call_at_positions` (the last block at [CLS] and given positions, what the
  pretraining and classification heads call) and `call_packed` (rows that pack several
  examples, each attending only to its own tokens: the input format of
  train_data.pack_examples). They are part of the model, not of a speed path: they
  change which positions and which attention pattern are computed, and run the same
  with any `kernels`.

  `kernels` is a speed path (bert_tf.kernels) that every layer of the encoder, and every
  head a model puts on it (`encoder.kernels`), hands its hot spots to; None (the
  default) computes everything with the layers as written, on any Keras backend. It
  changes no variable and is not part of the config.
  """

  def __init__(self, vocab_size: int = 30522, hidden_size: int = 768, num_layers: int = 12,
               num_attention_heads: int = 12, intermediate_size: int = 3072,
               hidden_activation: str = "gelu", dropout_rate: float = 0.1,
               attention_dropout_rate: float = 0.1, max_position_embeddings: int = 512,
               type_vocab_size: int = 2, initializer_range: float = 0.02,
               layer_norm_epsilon: float = 1e-12, dtype=None, kernels=None, **kwargs):
    # Validates the arguments the same way a config file is validated.
    configs.EncoderConfig(
        vocab_size=vocab_size, hidden_size=hidden_size, num_layers=num_layers,
        num_attention_heads=num_attention_heads, intermediate_size=intermediate_size,
        hidden_activation=hidden_activation, dropout_rate=dropout_rate,
        attention_dropout_rate=attention_dropout_rate,
        max_position_embeddings=max_position_embeddings, type_vocab_size=type_vocab_size,
        initializer_range=initializer_range, layer_norm_epsilon=layer_norm_epsilon)

    # === Layers ===
    embeddings = BertEmbeddings(
        vocab_size=vocab_size, hidden_size=hidden_size,
        max_position_embeddings=max_position_embeddings, type_vocab_size=type_vocab_size,
        dropout_rate=dropout_rate, initializer_range=initializer_range,
        layer_norm_epsilon=layer_norm_epsilon, dtype=dtype, kernels=kernels,
        name="embeddings")
    blocks = [
        TransformerBlock(
            hidden_size=hidden_size, num_heads=num_attention_heads,
            intermediate_size=intermediate_size, hidden_activation=hidden_activation,
            dropout_rate=dropout_rate, attention_dropout_rate=attention_dropout_rate,
            initializer_range=initializer_range, layer_norm_epsilon=layer_norm_epsilon,
            dtype=dtype, kernels=kernels, name=f"transformer_layer_{i}")
        for i in range(num_layers)
    ]
    pooler = keras.layers.Dense(
        hidden_size, activation="tanh",
        kernel_initializer=initializers.bert_initializer(initializer_range), dtype=dtype,
        name="pooler")

    # === Functional graph ===
    inputs = {
        constants.INPUT_WORD_IDS: keras.Input((None,), dtype="int32",
                                              name=constants.INPUT_WORD_IDS),
        constants.INPUT_MASK: keras.Input((None,), dtype="int32", name=constants.INPUT_MASK),
        constants.INPUT_TYPE_IDS: keras.Input((None,), dtype="int32",
                                              name=constants.INPUT_TYPE_IDS),
    }
    x = embeddings(inputs[constants.INPUT_WORD_IDS], inputs[constants.INPUT_TYPE_IDS])
    bias = attention_mask_bias(inputs[constants.INPUT_MASK])
    layer_outputs = []
    for block in blocks:
      x = block(x, bias)
      layer_outputs.append(x)
    sequence_output = ops.cast(x, "float32")
    pooled_output = pooler(x[:, 0, :])
    outputs = {
        constants.SEQUENCE_OUTPUT: sequence_output,
        constants.POOLED_OUTPUT: pooled_output,
        constants.ENCODER_OUTPUTS: layer_outputs,
    }
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    # A functional model drops `dtype`; the heads built on this encoder take its policy.
    if dtype is not None:
      self.dtype_policy = dtype

    # === Config ===
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.num_layers = num_layers
    self.num_attention_heads = num_attention_heads
    self.intermediate_size = intermediate_size
    self.hidden_activation = hidden_activation
    self.dropout_rate = dropout_rate
    self.attention_dropout_rate = attention_dropout_rate
    self.max_position_embeddings = max_position_embeddings
    self.type_vocab_size = type_vocab_size
    self.initializer_range = initializer_range
    self.layer_norm_epsilon = layer_norm_epsilon
    self.kernels = kernels
    self.embeddings = embeddings
    self.transformer_layers = blocks
    self.pooler = pooler

  @classmethod
  def from_config_object(cls, config: configs.EncoderConfig, dtype=None,
                         name: Optional[str] = "bert_encoder",
                         kernels=None) -> "BertEncoder":
    """Builds the encoder an EncoderConfig describes (dtype: a Keras dtype policy;
    kernels: a speed path, see the class docstring)."""
    return cls(**config.as_dict(), dtype=dtype, kernels=kernels, name=name)

  def call_at_positions(self, inputs, positions=None, training=None):
    """Runs the encoder computing its last block only where a head reads it.

    Every block but the last runs over all T positions; the last one only at [CLS]
    (for the pooler) and at `positions` (every position still serves as a key and
    value). The result equals the full encoder's outputs at those positions: on a
    BERT-base pretraining batch (20 of 128 positions) it saves about 6% of the
    forward and backward FLOPs, 13-15% on 4-layer models.

    Args:
      inputs: dict of the three int [B, T] inputs.
      positions: optional int [B, P], indices into T.
      training: whether dropout is active.

    Returns:
      dict: pooled_output float [B, H]; with positions, also sequence_output float32
      [B, P, H], the last layer's output at `positions`.
    """
    batch = ops.shape(inputs[constants.INPUT_WORD_IDS])[0]
    query_positions = ops.zeros((batch, 1), "int32")
    if positions is not None:
      query_positions = ops.concatenate([query_positions, ops.cast(positions, "int32")],
                                        axis=1)
    bias = attention_mask_bias(inputs[constants.INPUT_MASK])
    x = self._encode_queries(inputs, bias, bias, query_positions, training)
    outputs = {constants.POOLED_OUTPUT: self.pooler(x[:, 0, :])}
    if positions is not None:
      outputs[constants.SEQUENCE_OUTPUT] = ops.cast(x[:, 1:, :], "float32")
    return outputs

  def call_packed(self, inputs, cls_positions, training=None):
    """Runs the encoder over rows that pack several examples, each its own [CLS] ...
    [SEP] sequence, every example attending only to its own tokens.

    Each example's outputs equal those it gets alone in a row of its own. As in
    call_at_positions, the last block runs only at the queried positions.

    Args:
      inputs: dict of int [R, T]: input_word_ids, input_type_ids, input_position_ids
        (restarting at 0 with every example) and input_example_ids (1, 2, ... along
        a row, 0 at padding).
      cls_positions: int [R, Q], the positions to compute the last block at, usually
        the [CLS] of each example of the row (unused slots may repeat any position).
      training: whether dropout is active.

    Returns:
      dict: sequence_output float32 [R, Q, H], the last layer at cls_positions;
      pooled_output float [R, Q, H], the pooler applied there.
    """
    example_ids = ops.cast(inputs[constants.INPUT_EXAMPLE_IDS], "int32")
    cls_positions = ops.cast(cls_positions, "int32")
    query_ids = ops.take_along_axis(example_ids, cls_positions, axis=1)
    x = self._encode_queries(inputs, packed_attention_bias(example_ids),
                             packed_attention_bias(example_ids, query_ids), cls_positions,
                             training, position_ids=inputs[constants.INPUT_POSITION_IDS])
    return {constants.SEQUENCE_OUTPUT: ops.cast(x, "float32"),
            constants.POOLED_OUTPUT: self.pooler(x)}

  def _encode_queries(self, inputs, bias, query_bias, query_positions, training,
                      position_ids=None):
    """Every block but the last over all positions, the last at query_positions [B, Q];
    returns float [B, Q, H]."""
    x = self.embeddings(inputs[constants.INPUT_WORD_IDS], inputs[constants.INPUT_TYPE_IDS],
                        training=training, position_ids=position_ids)
    for block in self.transformer_layers[:-1]:
      x = block(x, bias, training=training)
    return self.transformer_layers[-1](x, query_bias, training=training,
                                       query_positions=query_positions)

  def get_embedding_table(self):
    """The [V, H] word-embedding variable (shared with the masked-LM head)."""
    return self.embeddings.word_embeddings

  def get_config(self):
    return {
        "name": self.name,
        "trainable": self.trainable,
        "vocab_size": self.vocab_size,
        "hidden_size": self.hidden_size,
        "num_layers": self.num_layers,
        "num_attention_heads": self.num_attention_heads,
        "intermediate_size": self.intermediate_size,
        "hidden_activation": self.hidden_activation,
        "dropout_rate": self.dropout_rate,
        "attention_dropout_rate": self.attention_dropout_rate,
        "max_position_embeddings": self.max_position_embeddings,
        "type_vocab_size": self.type_vocab_size,
        "initializer_range": self.initializer_range,
        "layer_norm_epsilon": self.layer_norm_epsilon,
    }

  @classmethod
  def from_config(cls, config):
    return cls(**config)

  def encoder_config(self) -> configs.EncoderConfig:
    """This encoder's hyperparameters as an EncoderConfig."""
    values = self.get_config()
    values.pop("name")
    values.pop("trainable")
    return configs.EncoderConfig(**values)

  @property
  def checkpoint_items(self):
    """Objects a checkpoint restores by name: the encoder itself.

    A read-only mapping: Keras's `.keras` saver walks properties, and a plain dict
    holding the model itself would send it into endless recursion.
    """
    return types.MappingProxyType({"encoder": self})
