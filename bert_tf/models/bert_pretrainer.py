"""BERT with its two pretraining heads: masked LM and next-sentence prediction."""

import types

import keras

from bert_tf import constants
from bert_tf.layers.masked_lm_head import MaskedLMHead
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.task_model import EncoderTaskModel


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPretrainer(EncoderTaskModel):
  """An encoder plus the masked-LM head (tied embeddings) and the next-sentence head.

  Inputs (a dict): the encoder's three inputs and
    masked_lm_positions: int32 [B, P], positions whose tokens are predicted.

  Outputs (a dict):
    mlm_logits: float32 [B, P, V].
    next_sentence_logits: float32 [B, 2].
  Loss: bert_tf.losses.pretraining_loss.

  Called on tensors, the model computes its encoder's last block only at [CLS] and the
  masked positions (BertEncoder.call_at_positions), which is all the heads read; the
  functional graph (used for saving, summaries and symbolic calls) is the plain one.
  With `sparse_last_layer=False` tensor calls run the plain graph too.
  """

  config_arguments = ("use_next_sentence_label", "sparse_last_layer")

  def __init__(self, encoder: BertEncoder, use_next_sentence_label: bool = True,
               sparse_last_layer: bool = True, **kwargs):
    # === Layers ===
    masked_lm = MaskedLMHead(
        encoder.embeddings, activation=encoder.hidden_activation,
        initializer_range=encoder.initializer_range,
        layer_norm_epsilon=encoder.layer_norm_epsilon, dtype=encoder.dtype_policy,
        kernels=encoder.kernels, name="masked_lm")
    next_sentence = None
    if use_next_sentence_label:
      next_sentence = self.classification_head(encoder, 2, dropout_rate=0.0,
                                                 name="next_sentence")

    # === Functional graph ===
    inputs = self.encoder_inputs(
        names=(*constants.ENCODER_INPUTS, constants.MASKED_LM_POSITIONS))
    encoded = encoder({name: inputs[name] for name in constants.ENCODER_INPUTS})
    mlm_logits = masked_lm(encoded[constants.SEQUENCE_OUTPUT],
                           inputs[constants.MASKED_LM_POSITIONS])
    outputs = {constants.MLM_LOGITS: keras.ops.cast(mlm_logits, "float32")}
    if next_sentence is not None:
      nsp_logits = next_sentence(encoded[constants.POOLED_OUTPUT])
      outputs[constants.NSP_LOGITS] = keras.ops.cast(nsp_logits, "float32")
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    # === Config ===
    self.encoder = encoder
    self.masked_lm = masked_lm
    self.next_sentence = next_sentence
    self.use_next_sentence_label = use_next_sentence_label
    self.sparse_last_layer = sparse_last_layer

  def call(self, inputs, training=None, mask=None):
    if not self.sparse_last_layer:
      return super().call(inputs, training=training, mask=mask)
    encoded = self.encoder.call_at_positions(
        {name: inputs[name] for name in constants.ENCODER_INPUTS},
        inputs[constants.MASKED_LM_POSITIONS], training=training)
    mlm_logits = self.masked_lm(encoded[constants.SEQUENCE_OUTPUT], training=training)
    outputs = {constants.MLM_LOGITS: keras.ops.cast(mlm_logits, "float32")}
    if self.next_sentence is not None:
      nsp_logits = self.next_sentence(encoded[constants.POOLED_OUTPUT], training=training)
      outputs[constants.NSP_LOGITS] = keras.ops.cast(nsp_logits, "float32")
    return outputs

  @property
  def checkpoint_items(self):
    """Objects a checkpoint restores by name: encoder and heads."""
    items = {"encoder": self.encoder, "masked_lm": self.masked_lm}
    if self.next_sentence is not None:
      items["next_sentence"] = self.next_sentence
    # Read-only, so that Keras's saver (which walks properties) leaves it alone.
    return types.MappingProxyType(items)
