"""Speed paths: per-backend implementations of the layers' hot spots, handed to a model
when it is built.

The layers (bert_tf.layers) compute as the paper reads, with keras.ops, on every Keras
backend, and call the hooks of a Kernels object (bert_tf.kernels.protocol) at their hot
spots: attention, the end of each half of a Transformer block (residual + dropout +
LayerNorm), bias + GELU, LayerNorm, dropout, the vocabulary logits and the loss. A
model built with `kernels=K` (BertEncoder and the heads pass it down to every layer)
computes those pieces K's way: the same variables and checkpoints, the same results to
rounding (and other dropout masks). `kernels=None` is the reference path
(protocol.REFERENCE).

The paths, one package each: `tensorflow_cpu` (TensorFlow on CPUs: XLA-fused
element-wise pieces, cheaper dropout masks) and `jax_gpu` (JAX on GPUs: fused attention
with dropout, cheaper dropout masks, a fused residual LayerNorm). Which one an experiment uses is
`runtime.fused_kernels`: true, false, or unset (auto: the TensorFlow CPU path where the
model runs on TensorFlow and TensorFlow sees no GPU or TPU, the JAX GPU path where it
runs on JAX and JAX on a GPU, the reference path everywhere else).

Imports neither Keras nor a framework at load (bert_tf.kernels.jax_gpu.xla_flags runs before
Keras chooses its backend).
"""

from bert_tf import configs


def tensorflow_sees_accelerators() -> bool:
  """Whether TensorFlow has a GPU or TPU to place the model on."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))


def jax_platform() -> str:
  """The platform of JAX's default device: "cpu", "gpu" or "tpu"."""
  import jax  # pylint: disable=g-import-not-at-top
  return jax.default_backend()


def for_runtime(runtime: configs.RuntimeConfig):
  """The speed path for an experiment's runtime section, or None (the reference path).

  Raises:
    ConfigError: runtime.fused_kernels is true where no speed path applies: TensorFlow
      with a GPU or TPU is not refused (the CPU path runs there), JAX other than on a
      GPU and the other Keras backends are.
  """
  import keras  # pylint: disable=g-import-not-at-top
  backend = keras.backend.backend()
  wanted = runtime.fused_kernels
  if backend == "jax":
    platform = jax_platform()
    if wanted is None:
      wanted = platform == "gpu"
    if not wanted:
      return None
    if platform != "gpu":
      raise configs.ConfigError(
          f"runtime.fused_kernels: the JAX kernels are for GPUs; JAX runs on {platform} "
          "here, with the reference layers (leave it unset)")
    return jax_gpu_kernels(attention=runtime.gpu_attention,
                           dropout_generator=runtime.gpu_dropout_generator,
                           layer_norm=runtime.gpu_layer_norm)
  on_tensorflow = backend == "tensorflow"
  if wanted is None:
    wanted = on_tensorflow and runtime.distribution_strategy != "tpu" and not (
        runtime.num_gpus or tensorflow_sees_accelerators())
  if not wanted:
    return None
  if not on_tensorflow:
    raise configs.ConfigError(
        "runtime.fused_kernels: the fused kernels are TensorFlow's (CPU) and JAX's "
        f"(GPU); the {backend} backend runs the reference layers (leave it unset)")
  return tensorflow_cpu_kernels()


def tensorflow_cpu_kernels():
  """The TensorFlow CPU speed path (imports TensorFlow)."""
  from bert_tf.kernels.tensorflow_cpu import hooks  # pylint: disable=g-import-not-at-top
  return hooks.KERNELS


def jax_gpu_kernels(**settings):
  """The JAX GPU speed path (imports JAX); `settings` as jax_gpu.hooks.JaxGpuKernels
  takes."""
  from bert_tf.kernels.jax_gpu import hooks  # pylint: disable=g-import-not-at-top
  return hooks.JaxGpuKernels(**settings)
