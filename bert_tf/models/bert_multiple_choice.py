"""BERT for multiple choice (SWAG): one score per choice, softmax over the choices."""

import keras
from keras import ops

from bert_tf import constants
from bert_tf.layers.flatten_choices import FlattenChoices
from bert_tf.models.bert_classifier import LOGITS
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.task_model import EncoderTaskModel


@keras.saving.register_keras_serializable(package="bert_tf")
class BertMultipleChoice(EncoderTaskModel):
  """Scores each [CLS] context [SEP] choice [SEP] sequence from its pooled vector.

  Inputs (a dict): input_word_ids, input_mask, input_type_ids, int32 [B, C, T].
  Outputs (a dict): logits, float32 [B, C]; softmax over C gives the choice.
  checkpoint_items: encoder, choice_scorer.
  """

  config_arguments = ("num_choices", "dropout_rate")

  def __init__(self, encoder: BertEncoder, num_choices: int, dropout_rate: float = 0.1,
               **kwargs):
    if num_choices < 2:
      raise ValueError(f"num_choices must be at least 2, got {num_choices}")
    # === Layers ===
    scorer = self.classification_head(encoder, 1, dropout_rate, "choice_scorer")
    flatten = FlattenChoices(name="flatten_choices")

    # === Functional graph ===
    inputs = self.encoder_inputs((num_choices, None))
    flat = {name: flatten(x) for name, x in inputs.items()}
    pooled = encoder(flat)[constants.POOLED_OUTPUT]
    scores = ops.reshape(scorer(pooled), (-1, num_choices))
    outputs = {LOGITS: ops.cast(scores, "float32")}
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    # === Config ===
    self.encoder = encoder
    self.choice_scorer = scorer
    self.num_choices = num_choices
    self.dropout_rate = dropout_rate

  @property
  def checkpoint_items(self):
    return {"encoder": self.encoder, "choice_scorer": self.choice_scorer}
