"""BERT for span question answering (SQuAD)."""

import keras

from bert_tf import constants
from bert_tf.layers.span_head import SpanHead
from bert_tf.models.bert_encoder import BertEncoder

START_LOGITS = "start_logits"
END_LOGITS = "end_logits"


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSpanLabeler(keras.Model):
  """An encoder plus SpanHead over its sequence output.

  Inputs (a dict): input_word_ids, input_mask, input_type_ids, int32 [B, T].

  Outputs (a dict):
    start_logits: float32 [B, T].
    end_logits: float32 [B, T].
  """

  def __init__(self, encoder: BertEncoder, **kwargs):
    # === Layers ===
    span_labeler = SpanHead(initializer_range=encoder.initializer_range,
                            dtype=encoder.dtype_policy, name="span_labeler")

    # === Functional graph ===
    inputs = {name: keras.Input((None,), dtype="int32", name=name)
              for name in constants.ENCODER_INPUTS}
    encoded = encoder(inputs)
    start_logits, end_logits = span_labeler(encoded[constants.SEQUENCE_OUTPUT])
    outputs = {START_LOGITS: keras.ops.cast(start_logits, "float32"),
               END_LOGITS: keras.ops.cast(end_logits, "float32")}
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    # === Config ===
    self.encoder = encoder
    self.span_labeler = span_labeler

  @property
  def checkpoint_items(self):
    """Objects a checkpoint restores by name: the encoder and the span head."""
    return {"encoder": self.encoder, "span_labeler": self.span_labeler}

  def get_config(self):
    return {
        "name": self.name,
        "trainable": self.trainable,
        "encoder": keras.saving.serialize_keras_object(self.encoder),
    }

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
    return cls(**config)
