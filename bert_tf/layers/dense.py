"""A dense layer whose widening matmul and bias + GELU are faster to train on CPU."""

import keras
import tensorflow as tf

from bert_tf.layers import fusion


@tf.function(jit_compile=True)
def _transpose(kernel):
  # Compiled on its own so that grappler cannot fold it back into a transposed matmul.
  return tf.transpose(kernel)


@tf.custom_gradient
def _widening_matmul(x, kernel):
  """x [N, I] @ kernel [I, O] with O > I, whose input gradient multiplies by a
  materialized kernel^T: oneDNN runs dy [N, O] @ kernel^T about 25-35% faster than the
  same product with transpose_b (bench/README.md, "Levers")."""

  def grad(dy):
    return (tf.matmul(dy, _transpose(kernel)),
            tf.matmul(x, dy, transpose_a=True))

  return tf.matmul(x, kernel), grad


@keras.saving.register_keras_serializable(package="bert_tf")
class Dense(keras.layers.Dense):
  """keras.layers.Dense (same arguments, weights and config) with two speedups.

  - A widening layer (units > input features, BERT's intermediate layer) multiplies its
    input gradient by a materialized transposed kernel, when the shapes are static.
  - An activation carrying a `bias_fused` attribute (the exact GELU of
    bert_tf.layers.initializers) is applied together with the bias in one XLA function
    when the shapes are static (bert_tf.layers.fusion).

  Call arguments:
    inputs: float [..., I].

  Returns:
    float [..., units].
  """

  def call(self, inputs, training=None):
    if self.lora_enabled or self.quantization_mode:
      return super().call(inputs, training=training)
    kernel = tf.cast(self.kernel, self.compute_dtype)
    features = kernel.shape[0]
    # Static shapes only, like bert_tf.layers.fusion: the custom gradient adds IdentityN
    # ops that exported signatures (dynamic batch) must not carry.
    if self.units > features and fusion.static(inputs):
      flat = tf.reshape(inputs, [-1, features])
      x = tf.reshape(_widening_matmul(flat, kernel),
                     tf.concat([tf.shape(inputs)[:-1], [self.units]], axis=0))
    else:
      x = keras.ops.matmul(inputs, kernel)
    fused = getattr(self.activation, "bias_fused", None)
    if self.bias is not None and fused is not None and fusion.static(x):
      return fused(x, tf.cast(self.bias, x.dtype))
    if self.bias is not None:
      x = keras.ops.add(x, self.bias)
    if self.activation is not None:
      x = self.activation(x)
    return x
