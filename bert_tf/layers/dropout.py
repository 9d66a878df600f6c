"""Dropout drawing 16 random bits per element from an explicitly chosen Philox stream."""

import keras
import tensorflow as tf

# Keep probabilities are multiples of 1/2^16: rate 0.1 drops with probability
# 6554/65536 = 0.100006, and kept values are scaled by the exact 1/keep probability.
_LEVELS = 1 << 16


@keras.saving.register_keras_serializable(package="bert_tf")
class Dropout(keras.layers.Dropout):
  """keras.layers.Dropout with a cheaper mask; same arguments, seed generator and config.

  Keras draws a float32 uniform per element from the stateless generator with the
  "auto_select" algorithm. Two things make that slow for BERT, whose attention
  probabilities alone are B x N x T x T elements per layer: 32 random bits where 16
  suffice (half the Philox work; a 1/65536 resolution of the rate), and, under XLA on
  CPU, "auto_select" compiles to a generator about 100x slower than naming Philox.

  Call arguments:
    inputs: float tensor of any shape.
    training: whether to drop.

  Returns:
    inputs with each element zeroed with probability round(rate * 2^16) / 2^16 and the
    others divided by the keep probability.
  """

  def keep_bits(self, inputs, training=False):
    """The random bits of this call's mask, for callers that apply it themselves
    (bert_tf.layers.fusion); each call advances the seed generator as `call` does.

    Returns:
      None where `call` would return its inputs unchanged (not training, rate 0);
      otherwise (bits, threshold, scale): uint16 bits shaped like inputs, the uint16
      scalar at or above which an element is kept, and the float scale of kept ones.
    """
    if self.noise_shape is not None:
      raise ValueError(f"{self.name}: keep_bits draws one bit per element; this layer "
                       f"has noise_shape {self.noise_shape}")
    if not training or self.rate == 0:
      return None
    threshold = min(int(round(self.rate * _LEVELS)), _LEVELS - 1)
    if threshold == 0:
      return None
    # The generator's int64 state, folded into int32 as keras.random does.
    seed = tf.cast(tf.math.floormod(self.seed_generator.next(), tf.int32.max - 1), tf.int32)
    shape = tf.shape(inputs)
    size = tf.size(inputs)
    words = tf.random.stateless_uniform([(size + 1) // 2], seed, minval=None, maxval=None,
                                        dtype=tf.uint32, alg="philox")
    bits = tf.reshape(tf.bitcast(words, tf.uint16), [-1])
    if inputs.shape.num_elements() is None or inputs.shape.num_elements() % 2:
      bits = bits[:size]
    return (tf.reshape(bits, shape), tf.constant(threshold, tf.uint16),
            tf.constant(_LEVELS / (_LEVELS - threshold), inputs.dtype))

  def call(self, inputs, training=False):
    if not training or self.rate == 0 or self.noise_shape is not None:
      return super().call(inputs, training=training)
    mask = self.keep_bits(inputs, training=training)
    if mask is None:
      return inputs
    bits, threshold, scale = mask
    return tf.where(bits >= threshold, inputs * scale, tf.zeros([], inputs.dtype))
