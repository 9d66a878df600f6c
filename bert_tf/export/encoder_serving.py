"""Serving a bare encoder: pooled and sequence outputs of raw text or token ids."""

import numpy as np
import tensorflow as tf

from bert_tf import constants
from bert_tf.export import serving_module


@serving_module.register_serving("encoder")
class EncoderServing(serving_module.ServingModule):
  """Outputs pooled_output float32 [B, H] and sequence_output float32 [B, T, H].

  With `pair=True` the raw-text signature takes `text` and `text_b`. It serves the
  encoder of any task's model.
  """

  serves_any_task = True
  answer_outputs = (frozenset({constants.POOLED_OUTPUT, constants.SEQUENCE_OUTPUT}),)

  @classmethod
  def from_task(cls, task, model, text_encoder, data_config, **options):
    """The module serving `model`'s encoder (the model itself when it has none); the
    task's serving options do not apply."""
    del task, data_config
    return cls(getattr(model, "encoder", model), text_encoder,
               **serving_module.given_options(options))

  @staticmethod
  def answer(outputs, row):
    return {name: outputs[name][row].tolist()
            for name in (constants.POOLED_OUTPUT, constants.SEQUENCE_OUTPUT)}

  @staticmethod
  def describe_answer(answer):
    pooled = np.asarray(answer[constants.POOLED_OUTPUT])
    shown = " ".join(f"{v:.3f}" for v in pooled[:6])
    return [f"  pooled_output [{pooled.size}]: {shown} ... (norm "
            f"{np.linalg.norm(pooled):.3f}); sequence_output "
            f"{list(np.shape(answer[constants.SEQUENCE_OUTPUT]))}"]

  def __init__(self, encoder, text_encoder, pair=False, name="encoder_serving"):
    inputs = (serving_module.TEXT, serving_module.TEXT_B) if pair else (serving_module.TEXT,)
    super().__init__(encoder, text_encoder, inputs, name=name)

  def predict_token_ids(self, inputs):
    outputs = self.call_model(inputs)
    return {
        constants.POOLED_OUTPUT: tf.cast(outputs[constants.POOLED_OUTPUT], tf.float32),
        constants.SEQUENCE_OUTPUT: tf.cast(outputs[constants.SEQUENCE_OUTPUT], tf.float32),
    }
