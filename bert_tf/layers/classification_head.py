"""Dropout and one dense layer over a pooled vector: next-sentence and classification."""

import keras

from bert_tf.kernels import protocol
from bert_tf.layers import initializers


@keras.saving.register_keras_serializable(package="bert_tf")
class ClassificationHead(keras.layers.Layer):
  """The one output layer that fine-tuning adds (and the next-sentence head).

  Call arguments:
    pooled: float [B, H].
    training: whether dropout is active.

  Returns:
    logits [B, num_classes] (num_classes 1 for regression), in the compute dtype.

  The dropout is the `dropout` hook of `kernels` (bert_tf.kernels.protocol; None: the
  reference computation).
  """

  def __init__(self, num_classes: int, dropout_rate: float = 0.0,
               initializer_range: float = 0.02, kernels=None, **kwargs):
    super().__init__(**kwargs)
    if num_classes < 1:
      raise ValueError(f"num_classes must be positive, got {num_classes}")
    self.num_classes = num_classes
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    self.kernels = kernels
    self.dropout = keras.layers.Dropout(dropout_rate, name="dropout",
                                        dtype=self.dtype_policy)
    self.dense = keras.layers.Dense(
        num_classes, kernel_initializer=initializers.bert_initializer(initializer_range),
        name="dense", dtype=self.dtype_policy)

  def build(self, input_shape):
    self.dense.build(input_shape)
    self.built = True

  def call(self, pooled, training=None):
    kernels = self.kernels or protocol.REFERENCE
    return self.dense(kernels.dropout(self.dropout, pooled, training))

  def compute_output_shape(self, input_shape):
    return tuple(input_shape[:-1]) + (self.num_classes,)

  def get_config(self):
    config = super().get_config()
    config.update(num_classes=self.num_classes, dropout_rate=self.dropout_rate,
                  initializer_range=self.initializer_range)
    return config
