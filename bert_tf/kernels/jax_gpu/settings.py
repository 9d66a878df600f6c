"""The JAX GPU speed path's settings: runtime.kernels.jax_gpu (imports neither JAX nor
Keras, so that the section is known where an experiment is read)."""

import dataclasses

from bert_tf import configs

# The implementations each setting chooses between (bert_tf.kernels.jax_gpu.hooks).
ATTENTION = ("auto", "pallas", "xla")
DROPOUT_GENERATORS = ("hash", "philox", "threefry")
LAYER_NORM = ("xla", "pallas")


@dataclasses.dataclass
class JaxGpuKernelsConfig(configs.Config):
  """The JAX GPU speed path's choices (bert_tf.kernels.jax_gpu): attention auto (the
  Pallas kernel where it compiles and agrees with XLA on this GPU), pallas or xla;
  dropout masks from a hash of each element's index (hash), XLA's philox or Keras's
  threefry; the residual, dropout and LayerNorm as XLA fuses them (xla) or one Pallas
  kernel (pallas)."""

  attention: str = "auto"
  dropout_generator: str = "hash"
  layer_norm: str = "xla"

  def validate(self):
    for name, allowed in (("attention", ATTENTION),
                          ("dropout_generator", DROPOUT_GENERATORS),
                          ("layer_norm", LAYER_NORM)):
      configs.require(getattr(self, name) in allowed,
                      f"{name} must be one of {', '.join(allowed)}, got "
                      f"'{getattr(self, name)}'")
