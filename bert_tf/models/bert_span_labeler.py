"""BERT for span question answering (SQuAD)."""

import keras

from bert_tf import constants
from bert_tf.layers.span_head import SpanHead
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.task_model import EncoderTaskModel

START_LOGITS = "start_logits"
END_LOGITS = "end_logits"


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSpanLabeler(EncoderTaskModel):
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
    inputs = self.encoder_inputs()
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
