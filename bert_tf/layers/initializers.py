"""The weight initializer every BERT variable uses, and the activations by name."""

import keras
import numpy as np

from bert_tf.kernels import protocol


@keras.saving.register_keras_serializable(package="bert_tf")
class TruncatedNormal(keras.initializers.Initializer):
  """The original release's initializer: normal values with the given standard
  deviation, those beyond two deviations drawn again.

  Drawn with NumPy, seeded from its global generator (which keras.utils.set_random_seed
  seeds), not with the backend's: the same seed gives the same weights on every Keras
  backend, so a run on the TensorFlow engine and its twin on the JAX engine start from
  identical models.
  """

  def __init__(self, stddev: float = 0.02):
    self.stddev = float(stddev)

  def __call__(self, shape, dtype=None):
    # One seed from the global generator, then NumPy's faster Generator in float32.
    generator = np.random.default_rng(np.random.randint(2**31 - 1))
    values = generator.standard_normal(shape, dtype=np.float32)
    outside = np.abs(values) > 2.0
    while outside.any():
      values[outside] = generator.standard_normal(int(outside.sum()), dtype=np.float32)
      outside = np.abs(values) > 2.0
    return keras.ops.convert_to_tensor(values * self.stddev,
                                       dtype=dtype or keras.config.floatx())

  def get_config(self):
    return {"stddev": self.stddev}


def bert_initializer(stddev: float = 0.02) -> keras.initializers.Initializer:
  """Truncated normal with the given standard deviation, as the original release."""
  return TruncatedNormal(stddev=stddev)


def activation_fn(name: str):
  """Returns the activation function named in EncoderConfig.hidden_activation."""
  if name == "gelu":
    # The exact (erf) form, as the paper and the released checkpoints.
    return protocol.exact_gelu
  if name == "gelu_approximate":
    return lambda x: keras.activations.gelu(x, approximate=True)
  return keras.activations.get(name)
