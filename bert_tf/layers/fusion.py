"""Element-wise pieces of the encoder compiled by XLA when their shapes are static.

TensorFlow runs an unfused LayerNorm, GELU or softmax cross-entropy as a handful of
kernels, each a pass over memory; XLA fuses each into one or two loops, forward and
backward. XLA compiles once per input shape, so the compiled path is taken only where
the shape is fully known when the step is traced (pretraining batches of a fixed length,
drop_remainder): a batch padded to its longest example, whose length changes from step
to step, would compile again for every new length and takes the plain path instead.
The matmuls stay outside, where TensorFlow's oneDNN kernels beat XLA's on CPU.
"""

import tensorflow as tf

_LAYER_NORMS = {}


def static(*tensors) -> bool:
  """Whether the compiled path applies: inside a traced function (eager calls run one
  op at a time anyway) and with every tensor's shape fully known."""
  if tf.executing_eagerly():
    return False
  return all(isinstance(t, tf.Tensor) and t.shape.is_fully_defined() for t in tensors)


def _layer_norm(x, gamma, beta, epsilon):
  # The formula of keras.ops.layer_normalization, so both paths agree to rounding.
  mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
  inv = tf.math.rsqrt(variance + epsilon) * gamma
  return x * inv + (beta - mean * inv)


def layer_norm(x, gamma, beta, epsilon: float):
  """LayerNorm over the last axis, XLA-compiled.

  Args:
    x: float32 [..., H]; gamma, beta: float32 [H].

  Returns:
    float32 [..., H].
  """
  if epsilon not in _LAYER_NORMS:
    _LAYER_NORMS[epsilon] = tf.function(
        lambda x, gamma, beta: _layer_norm(x, gamma, beta, epsilon), jit_compile=True)
  return _LAYER_NORMS[epsilon](x, gamma, beta)


@tf.function(jit_compile=True)
def gelu(x):
  """The exact (erf) GELU, XLA-compiled: float [...] -> float [...]."""
  return tf.nn.gelu(x, approximate=False)


@tf.function(jit_compile=True)
def bias_gelu(x, bias):
  """gelu(x + bias) with the exact GELU, XLA-compiled; the bias gradient comes out of
  the same fused loop as the input gradient. float [..., N], [N] -> float [..., N]."""
  return tf.nn.gelu(x + bias, approximate=False)
