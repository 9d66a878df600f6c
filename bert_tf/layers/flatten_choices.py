"""Folds the choice axis of multiple-choice inputs into the batch axis."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="bert_tf")
class FlattenChoices(keras.layers.Layer):
  """[B, C, T] -> [B * C, T], so that the encoder sees one sequence per choice.

  The sequence length T may be unknown until run time (dynamic padding), which
  keras.layers.Reshape cannot express; this layer reads it from the tensor.
  """

  def call(self, x):
    return ops.reshape(x, (-1, ops.shape(x)[-1]))

  def compute_output_shape(self, input_shape):
    batch, choices, length = input_shape
    flat = None if batch is None or choices is None else batch * choices
    return (flat, length)
