"""The SQuAD output layer: a start and an end vector over the token representations."""

import keras

from bert_tf.layers import initializers


@keras.saving.register_keras_serializable(package="bert_tf")
class SpanHead(keras.layers.Layer):
  """Dense(2) over every token: start and end logits of an answer span.

  As in the paper, the start (end) logit of token i is the dot product of a learned
  start (end) vector with the token's final hidden state, plus a bias. No dropout, as
  the original run_squad.

  Call arguments:
    sequence_output: float [B, T, H].

  Returns:
    (start_logits, end_logits), each [B, T] in the compute dtype.
  """

  def __init__(self, initializer_range: float = 0.02, **kwargs):
    super().__init__(**kwargs)
    self.initializer_range = initializer_range
    self.dense = keras.layers.Dense(
        2, kernel_initializer=initializers.bert_initializer(initializer_range),
        name="dense", dtype=self.dtype_policy)

  def build(self, input_shape):
    self.dense.build(input_shape)
    self.built = True

  def call(self, sequence_output):
    logits = self.dense(sequence_output)
    return logits[..., 0], logits[..., 1]

  def compute_output_shape(self, input_shape):
    shape = tuple(input_shape[:-1])
    return shape, shape

  def get_config(self):
    config = super().get_config()
    config.update(initializer_range=self.initializer_range)
    return config
