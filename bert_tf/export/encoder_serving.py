"""Serving a bare encoder: pooled and sequence outputs of raw text or token ids."""

import tensorflow as tf

from bert_tf import constants
from bert_tf.export import serving_module


@serving_module.register_serving("encoder")
class EncoderServing(serving_module.ServingModule):
  """Outputs pooled_output float32 [B, H] and sequence_output float32 [B, T, H].

  With `pair=True` the raw-text signature takes `text` and `text_b`.
  """

  def __init__(self, encoder, text_encoder, pair=False, name="encoder_serving"):
    inputs = (serving_module.TEXT, serving_module.TEXT_B) if pair else (serving_module.TEXT,)
    super().__init__(encoder, text_encoder, inputs, name=name)

  def predict_token_ids(self, inputs):
    outputs = self.call_model(inputs)
    return {
        constants.POOLED_OUTPUT: tf.cast(outputs[constants.POOLED_OUTPUT], tf.float32),
        constants.SEQUENCE_OUTPUT: tf.cast(outputs[constants.SEQUENCE_OUTPUT], tf.float32),
    }
