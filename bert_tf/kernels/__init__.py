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
with dropout, cheaper dropout masks, a fused residual LayerNorm). Each is a KernelSet
registered by name at the end of this module (bert_tf.configs.kernel_sets: the backend
and platforms it serves, its settings class, how it is built); several may serve one
backend and platform. A model is built with the set `runtime.kernels.set` names, else
with the default set of the backend and platform it runs on (`for_runtime`); whether an
experiment uses one is `runtime.fused_kernels`: true, false, or unset (on where a set is
named or is the default: TensorFlow on a CPU, JAX on a GPU). A set's settings are the
section named after it in `runtime.kernels` (runtime.kernels.jax_gpu.attention, ...).
CONTRIBUTING.md says how to add a set.

Imports neither Keras nor a framework at load (bert_tf.kernels.jax_gpu.xla_flags runs before
Keras chooses its backend).
"""

import contextlib
from typing import List, Optional

from bert_tf import configs
from bert_tf.configs import kernel_sets
from bert_tf.kernels.jax_gpu import settings as jax_gpu_settings


def tensorflow_sees_accelerators() -> bool:
  """Whether TensorFlow has a GPU or TPU to place the model on."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))


# The platform models are built for instead of JAX's default device's, while the
# ahead-of-time compile builds one for a target it does not have (`target_platform`).
_TARGET_PLATFORM: List[str] = []


@contextlib.contextmanager
def target_platform(platform: str):
  """Inside, JAX models are built for `platform` ("gpu", "tpu"): the speed path of that
  platform, its "auto" choices made as there (bert_tf.training.jax_engine.compile_for)."""
  _TARGET_PLATFORM.append(platform)
  try:
    yield
  finally:
    _TARGET_PLATFORM.pop()


def jax_platform() -> str:
  """The platform JAX models are built for: `target_platform`'s, else JAX's default
  device's ("cpu", "gpu" or "tpu")."""
  if _TARGET_PLATFORM:
    return _TARGET_PLATFORM[-1]
  import jax  # pylint: disable=g-import-not-at-top
  return jax.default_backend()


def platform_of(backend: str, runtime: configs.RuntimeConfig) -> str:
  """Where the model runs on `backend`: JAX's default device's platform; for TensorFlow
  "tpu" under the TPU strategy, "gpu" where runtime.num_gpus is set or TensorFlow sees
  an accelerator, else "cpu"; "cpu" for the other backends."""
  if backend == "jax":
    return jax_platform()
  if backend == "tensorflow":
    if runtime.distribution_strategy == "tpu":
      return "tpu"
    return "gpu" if runtime.num_gpus or tensorflow_sees_accelerators() else "cpu"
  return "cpu"


def _chosen(runtime: configs.RuntimeConfig, backend: str):
  """The set runtime.kernels.set names, checked to run on `backend` and its platform.

  Raises:
    ConfigError: no such set, or one of another backend or platform (naming where it
      runs and where the model does).
  """
  name = runtime.kernels.set
  kernel_set = kernel_sets.registered(name)
  if kernel_set is None:
    raise configs.ConfigError(f"runtime.kernels.set: no kernel set '{name}' (kernel sets: "
                              f"{kernel_sets.describe()})")
  platform = platform_of(backend, runtime) if kernel_set.backend == backend else ""
  if not kernel_set.serves(backend, platform):
    raise configs.ConfigError(
        f"runtime.kernels.set: the kernel set '{name}' runs {kernel_set.where()}; the model "
        f"runs on {backend}{' on ' + platform if platform else ''}")
  return kernel_set


def for_runtime(runtime: configs.RuntimeConfig):
  """The speed path for an experiment's runtime section, or None (the reference path):
  the set runtime.kernels.set names, else the default set of the Keras backend and the
  platform the model runs on (with runtime.fused_kernels true and no default there, the
  first set registered there), built with the runtime section. runtime.fused_kernels
  false is always the reference path; unset, a named set or the default one.

  Raises:
    ConfigError: the named set is unknown or runs elsewhere; or runtime.fused_kernels
      is true where no set runs (naming the backend, the platform and the sets).
  """
  import keras  # pylint: disable=g-import-not-at-top
  backend = keras.backend.backend()
  wanted = runtime.fused_kernels
  if wanted is False:
    return None
  if runtime.kernels.set:
    return _chosen(runtime, backend).build(runtime)
  # The platform is asked only of a backend with sets (TensorFlow's costs its import).
  platform = platform_of(backend, runtime) if kernel_sets.of_backend(backend) else ""
  kernel_set = kernel_sets.default_for(backend, platform)
  if kernel_set is None and wanted:
    kernel_set = next(iter(kernel_sets.serving(backend, platform)), None)
    if kernel_set is None:
      raise configs.ConfigError(
          f"runtime.fused_kernels: no speed path is registered for the {backend} backend"
          f"{' on ' + platform if platform else ''} (registered: {kernel_sets.describe()}); "
          "it runs the reference layers here (leave it unset)")
  return None if kernel_set is None else kernel_set.build(runtime)


def tensorflow_cpu_kernels(runtime: Optional[configs.RuntimeConfig] = None):
  """The TensorFlow CPU speed path (imports TensorFlow); it takes no settings."""
  del runtime
  from bert_tf.kernels.tensorflow_cpu import hooks  # pylint: disable=g-import-not-at-top
  return hooks.KERNELS


def jax_gpu_kernels(runtime: Optional[configs.RuntimeConfig] = None):
  """The JAX GPU speed path (imports JAX), with runtime.kernels.jax_gpu's settings (the
  defaults where `runtime` is None)."""
  from bert_tf.kernels.jax_gpu import hooks  # pylint: disable=g-import-not-at-top
  settings = (runtime or configs.RuntimeConfig()).kernels.settings(JAX_GPU.name)
  return hooks.JaxGpuKernels(attention=settings.attention,
                             dropout_generator=settings.dropout_generator,
                             layer_norm=settings.layer_norm,
                             target=bool(_TARGET_PLATFORM))


# The CPU set runs where TensorFlow has an accelerator too, when asked for: its pieces
# are TensorFlow ops that XLA compiles for the device.
TENSORFLOW_CPU = kernel_sets.register(kernel_sets.KernelSet(
    "tensorflow_cpu", "tensorflow", ("cpu", "gpu", "tpu"), tensorflow_cpu_kernels,
    default_platforms=("cpu",)))
JAX_GPU = kernel_sets.register(kernel_sets.KernelSet(
    "jax_gpu", "jax", ("gpu",), jax_gpu_kernels,
    settings=jax_gpu_settings.JaxGpuKernelsConfig))
