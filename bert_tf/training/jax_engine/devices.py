"""The devices a JAX run trains on, from the same runtime section as a TensorFlow run.

runtime.distribution_strategy keeps its meaning on JAX, so that one YAML runs on
either engine:
  one_device             the first local device;
  mirrored               data parallel over every local device of this one process;
  multi_worker_mirrored  data parallel over every device of every process
                         (jax.distributed, started from Keras's KERAS_DISTRIBUTION_*
                         variables before the first computation);
  tpu                    TensorFlow's TPUStrategy has no JAX meaning: on JAX a TPU's
                         cores are devices like any other (mirrored,
                         multi_worker_mirrored).
"""

import os
from typing import List

import jax
import keras

from bert_tf import configs

_NUM_PROCESSES = "KERAS_DISTRIBUTION_NUM_PROCESSES"


def check_runtime(runtime: configs.RuntimeConfig) -> None:
  """Raises ConfigError for runtime settings that have no meaning on JAX."""
  if runtime.distribution_strategy == "tpu":
    raise configs.ConfigError(
        "runtime.distribution_strategy=tpu is TensorFlow's TPUStrategy; on JAX a TPU's "
        "cores are devices like any other: use mirrored (one host) or "
        "multi_worker_mirrored (several hosts)")


def start(runtime: configs.RuntimeConfig) -> None:
  """Before JAX computes anything: splits the CPU into runtime.num_cpu_devices devices,
  and starts jax.distributed where KERAS_DISTRIBUTION_NUM_PROCESSES > 1 (its
  collectives on CPUs through gloo).

  Raises:
    ConfigError: JAX set up its devices already with another CPU split.
  """
  if runtime.num_cpu_devices > 1 and jax.config.jax_num_cpu_devices != runtime.num_cpu_devices:
    try:
      jax.config.update("jax_num_cpu_devices", runtime.num_cpu_devices)
    except RuntimeError:
      raise configs.ConfigError(
          f"runtime.num_cpu_devices={runtime.num_cpu_devices}: JAX has set up its devices "
          f"already ({jax.device_count()}); start a new process (or set "
          "XLA_FLAGS=--xla_force_host_platform_device_count=N before JAX starts)") from None
  if int(os.environ.get(_NUM_PROCESSES, "1") or 1) > 1 and not jax.distributed.is_initialized():
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    keras.distribution.initialize()


def keep_tensorflow_off_accelerators() -> None:
  """Where TensorFlow is installed (a tf.data input runs in this process), keeps it off
  the accelerators JAX uses."""
  try:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
  except ImportError:
    return
  try:
    tf.config.set_visible_devices([], "GPU")
  except RuntimeError:
    pass  # TensorFlow initialized its devices already.


def data_parallel_devices(runtime: configs.RuntimeConfig) -> List:
  """The devices of runtime.distribution_strategy (see the module docstring).

  Raises:
    ConfigError: several processes with a strategy of one process.
  """
  strategy = runtime.distribution_strategy
  if jax.process_count() > 1 and strategy != "multi_worker_mirrored":
    raise configs.ConfigError(
        f"runtime.distribution_strategy={strategy} trains in one process, but "
        f"{jax.process_count()} processes run: use multi_worker_mirrored")
  if strategy == "one_device":
    return jax.local_devices()[:1]
  if strategy == "mirrored":
    return jax.local_devices()
  return jax.devices()


def set_distribution(devices: List) -> None:
  """Keras's DataParallel over `devices` where there are several (none for one)."""
  if len(devices) > 1:
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
  else:
    keras.distribution.set_distribution(None)
