"""A TF Hub-style BERT encoder SavedModel: dict of token ids in, dict out.

The reloaded object is callable on {input_word_ids, input_mask, input_type_ids}
(int32 [B, T]) and returns pooled_output float32 [B, H], sequence_output float32
[B, T, H] and encoder_outputs (a list of float32 [B, T, H], one per layer). When
exported from a pretraining model, its sub-object `mlm` is callable on the same
inputs plus masked_lm_positions (int32 [B, P]) and also returns mlm_logits float32
[B, P, V].
"""

import tensorflow as tf

from bert_tf import constants


def _encoder_spec():
  return {name: tf.TensorSpec([None, None], tf.int32, name=name)
          for name in constants.ENCODER_INPUTS}


def _float32(outputs):
  return tf.nest.map_structure(lambda x: tf.cast(x, tf.float32), outputs)


class HubMaskedLM(tf.Module):
  """The pretraining model's masked-LM output, reached as `encoder.mlm`."""

  def __init__(self, pretrainer, name="mlm"):
    super().__init__(name=name)
    self.pretrainer = pretrainer

  @tf.function(input_signature=[{
      **{name: tf.TensorSpec([None, None], tf.int32, name=name)
         for name in constants.ENCODER_INPUTS},
      constants.MASKED_LM_POSITIONS: tf.TensorSpec([None, None], tf.int32,
                                                   name=constants.MASKED_LM_POSITIONS)}])
  def __call__(self, inputs):
    """Encoder inputs plus masked_lm_positions -> outputs with mlm_logits."""
    encoded = self.pretrainer.encoder(
        {name: inputs[name] for name in constants.ENCODER_INPUTS}, training=False)
    logits = self.pretrainer.masked_lm(encoded[constants.SEQUENCE_OUTPUT],
                                       inputs[constants.MASKED_LM_POSITIONS], training=False)
    outputs = _float32({constants.SEQUENCE_OUTPUT: encoded[constants.SEQUENCE_OUTPUT],
                        constants.POOLED_OUTPUT: encoded[constants.POOLED_OUTPUT]})
    outputs[constants.MLM_LOGITS] = tf.cast(logits, tf.float32)
    return outputs


class HubEncoder(tf.Module):
  """A BertEncoder (and optionally its masked-LM head) as a loadable SavedModel object."""

  def __init__(self, encoder, pretrainer=None, name="bert_encoder"):
    super().__init__(name=name)
    self.encoder = encoder
    if pretrainer is not None:
      self.mlm = HubMaskedLM(pretrainer)

  @tf.function(input_signature=[_encoder_spec()])
  def __call__(self, inputs):
    """Encoder inputs -> pooled_output, sequence_output, encoder_outputs."""
    return self._outputs(inputs)

  def _outputs(self, inputs):
    outputs = self.encoder(inputs, training=False)
    return _float32({
        constants.POOLED_OUTPUT: outputs[constants.POOLED_OUTPUT],
        constants.SEQUENCE_OUTPUT: outputs[constants.SEQUENCE_OUTPUT],
        constants.ENCODER_OUTPUTS: list(outputs[constants.ENCODER_OUTPUTS]),
    })

  def serving_signature(self):
    """serving_default for TF Serving: pooled_output and sequence_output."""
    def serve(inputs):
      outputs = self._outputs(inputs)
      return {name: outputs[name]
              for name in (constants.POOLED_OUTPUT, constants.SEQUENCE_OUTPUT)}
    return tf.function(serve).get_concrete_function(_encoder_spec())
