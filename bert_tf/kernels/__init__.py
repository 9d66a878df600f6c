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
registered for the (Keras backend, platform) pairs it serves (`register`); a model is
built with the set registered for the backend and platform it runs on. Whether an
experiment uses it is `runtime.fused_kernels`: true, false, or unset (the set's own
default: on for TensorFlow on a CPU and JAX on a GPU, off for the TensorFlow CPU set
where TensorFlow runs on a GPU or TPU); a set's settings are the section named after it
in `runtime.kernels` (runtime.kernels.jax_gpu.attention, ...). CONTRIBUTING.md says how
to add a set for one backend.

Imports neither Keras nor a framework at load (bert_tf.kernels.jax_gpu.xla_flags runs before
Keras chooses its backend).
"""

import contextlib
import dataclasses
from typing import Callable, Dict, List, Optional, Tuple

from bert_tf import configs


@dataclasses.dataclass(frozen=True)
class KernelSet:
  """A speed path for one Keras backend on one platform.

  Attributes:
    backend: the Keras backend ("tensorflow", "jax", ...).
    platform: where the model runs on it: "cpu", "gpu" or "tpu" (`platform_of`).
    name: the set's name, and the name of its settings section in runtime.kernels
      where it takes any.
    build: runtime config (configs.RuntimeConfig) -> the Kernels object
      (bert_tf.kernels.protocol.Kernels) the model is built with; imports its framework
      when called, not when registered.
    on_by_default: whether an unset runtime.fused_kernels uses it.
  """

  backend: str
  platform: str
  name: str
  build: Callable[[configs.RuntimeConfig], object]
  on_by_default: bool = True


_REGISTRY: Dict[Tuple[str, str], KernelSet] = {}


def register(kernel_set: KernelSet) -> Optional[KernelSet]:
  """Makes `kernel_set` the speed path of its (backend, platform); returns the set it
  replaces there, or None."""
  key = (kernel_set.backend, kernel_set.platform)
  previous = _REGISTRY.get(key)
  _REGISTRY[key] = kernel_set
  return previous


def unregister(backend: str, platform: str) -> Optional[KernelSet]:
  """Removes the set of (backend, platform); returns it, or None where there was none."""
  return _REGISTRY.pop((backend, platform), None)


def registered(backend: str, platform: str) -> Optional[KernelSet]:
  """The set registered for (backend, platform), or None."""
  return _REGISTRY.get((backend, platform))


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


def _where_registered() -> str:
  pairs = sorted(_REGISTRY)
  return "; ".join(f"{backend} on {platform} ({_REGISTRY[(backend, platform)].name})"
                   for backend, platform in pairs) or "none"


def for_runtime(runtime: configs.RuntimeConfig):
  """The speed path for an experiment's runtime section, or None (the reference path):
  the set registered for the Keras backend and the platform it runs on, built with the
  runtime section, where runtime.fused_kernels (or, unset, the set's default) asks for it.

  Raises:
    ConfigError: runtime.fused_kernels is true where no set is registered (naming the
      backend, the platform and where sets are).
  """
  import keras  # pylint: disable=g-import-not-at-top
  backend = keras.backend.backend()
  wanted = runtime.fused_kernels
  if wanted is False:
    return None
  # The platform is asked only of a backend with sets (TensorFlow's costs its import).
  platform = (platform_of(backend, runtime) if any(key[0] == backend for key in _REGISTRY)
              else "")
  kernel_set = registered(backend, platform)
  if kernel_set is None:
    if wanted:
      raise configs.ConfigError(
          f"runtime.fused_kernels: no speed path is registered for the {backend} backend"
          f"{' on ' + platform if platform else ''} (registered: {_where_registered()}); "
          "it runs the reference layers here (leave it unset)")
    return None
  if wanted is None and not kernel_set.on_by_default:
    return None
  return kernel_set.build(runtime)


def tensorflow_cpu_kernels(runtime: Optional[configs.RuntimeConfig] = None):
  """The TensorFlow CPU speed path (imports TensorFlow); it takes no settings."""
  del runtime
  from bert_tf.kernels.tensorflow_cpu import hooks  # pylint: disable=g-import-not-at-top
  return hooks.KERNELS


def jax_gpu_kernels(runtime: Optional[configs.RuntimeConfig] = None):
  """The JAX GPU speed path (imports JAX), with runtime.kernels.jax_gpu's settings (the
  defaults where `runtime` is None)."""
  from bert_tf.kernels.jax_gpu import hooks  # pylint: disable=g-import-not-at-top
  settings = (runtime or configs.RuntimeConfig()).kernels.jax_gpu
  return hooks.JaxGpuKernels(attention=settings.attention,
                             dropout_generator=settings.dropout_generator,
                             layer_norm=settings.layer_norm,
                             target=bool(_TARGET_PLATFORM))


register(KernelSet("tensorflow", "cpu", "tensorflow_cpu", tensorflow_cpu_kernels))
# The CPU set runs where TensorFlow has an accelerator too, when asked for: its pieces
# are TensorFlow ops that XLA compiles for the device.
for _platform in ("gpu", "tpu"):
  register(KernelSet("tensorflow", _platform, "tensorflow_cpu", tensorflow_cpu_kernels,
                     on_by_default=False))
register(KernelSet("jax", "gpu", "jax_gpu", jax_gpu_kernels))
