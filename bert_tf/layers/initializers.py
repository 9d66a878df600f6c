"""The weight initializer every BERT variable uses, and the activations by name."""

import keras


def bert_initializer(stddev: float = 0.02) -> keras.initializers.Initializer:
  """Truncated normal with the given standard deviation, as the original release."""
  return keras.initializers.TruncatedNormal(stddev=stddev)


def activation_fn(name: str):
  """Returns the activation function named in EncoderConfig.hidden_activation."""
  if name == "gelu":
    # The exact (erf) form, as the paper and the released checkpoints.
    return _exact_gelu
  if name == "gelu_approximate":
    return lambda x: keras.activations.gelu(x, approximate=True)
  return keras.activations.get(name)


def _exact_gelu(x):
  return keras.activations.gelu(x, approximate=False)
