"""BERT for token tagging (named-entity recognition and the like)."""

import keras

from bert_tf import constants
from bert_tf.models.bert_classifier import LOGITS
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.task_model import EncoderTaskModel


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTokenClassifier(EncoderTaskModel):
  """An encoder plus dropout and a dense layer applied to every position.

  Inputs (a dict): input_word_ids, input_mask, input_type_ids, int32 [B, T].
  Outputs (a dict): logits, float32 [B, T, num_classes].
  checkpoint_items: encoder, tagger.
  """

  config_arguments = ("num_classes", "dropout_rate")

  def __init__(self, encoder: BertEncoder, num_classes: int, dropout_rate: float = 0.1,
               **kwargs):
    # === Layers ===
    tagger = self.classification_head(encoder, num_classes, dropout_rate, "tagger")

    # === Functional graph ===
    inputs = self.encoder_inputs()
    sequence = encoder(inputs)[constants.SEQUENCE_OUTPUT]
    outputs = {LOGITS: keras.ops.cast(tagger(sequence), "float32")}
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    # === Config ===
    self.encoder = encoder
    self.tagger = tagger
    self.num_classes = num_classes
    self.dropout_rate = dropout_rate

  @property
  def checkpoint_items(self):
    return {"encoder": self.encoder, "tagger": self.tagger}
