"""LayerNorm over the last axis that XLA fuses when its input shape is static."""

import keras
from keras import ops
import tensorflow as tf

from bert_tf.layers import fusion


@keras.saving.register_keras_serializable(package="bert_tf")
class LayerNormalization(keras.layers.LayerNormalization):
  """keras.layers.LayerNormalization (same arguments, weights and config) whose
  last-axis, centered and scaled form runs as one XLA-compiled function when the input
  shape is fully known (bert_tf.layers.fusion).

  Call arguments:
    inputs: float [..., H].

  Returns:
    float [..., H] in the compute dtype.
  """

  def call(self, inputs):
    if (fusion.static(inputs) and self.axis in (-1, [-1], len(inputs.shape) - 1,
                                                 [len(inputs.shape) - 1])
        and self.center and self.scale and not self.rms_scaling
        and inputs.dtype == "float32"):
      gamma, beta = tf.convert_to_tensor(self.gamma), tf.convert_to_tensor(self.beta)
      return ops.cast(fusion.layer_norm(inputs, gamma, beta, self.epsilon),
                      self.compute_dtype)
    return super().call(inputs)
