"""Device setup and the tf.distribute strategy a RuntimeConfig names.

`configure_runtime` must run before TensorFlow initializes its devices (before the
first op) when it splits the CPU into logical devices (later calls leave an existing
split alone) or trains on several workers (it builds MultiWorkerMirroredStrategy then).
"""

import logging
import os
from typing import Dict, Sequence, Tuple

import keras
import tensorflow as tf

from bert_tf import configs


def configure_runtime(runtime: configs.RuntimeConfig) -> None:
  """Applies seed, determinism and the CPU split of `runtime`.

  num_cpu_devices > 1 splits the physical CPU into that many logical devices, so that
  MirroredStrategy can run on a machine without accelerators.
  """
  if runtime.num_cpu_devices > 1:
    cpus = tf.config.list_physical_devices("CPU")
    try:
      tf.config.set_logical_device_configuration(
          cpus[0], [tf.config.LogicalDeviceConfiguration()] * runtime.num_cpu_devices)
    except RuntimeError:
      have = len(tf.config.list_logical_devices("CPU"))
      if have != runtime.num_cpu_devices:
        raise RuntimeError(
            f"runtime.num_cpu_devices={runtime.num_cpu_devices} but TensorFlow already "
            f"initialized {have} logical CPU device(s); set it before any TF op runs"
        ) from None
  keras.utils.set_random_seed(runtime.seed)
  if runtime.deterministic:
    tf.config.experimental.enable_op_determinism()
  if runtime.distribution_strategy == "multi_worker_mirrored":
    multi_worker_strategy(runtime)


def _communication_options(runtime: configs.RuntimeConfig):
  implementation = {
      "auto": tf.distribute.experimental.CommunicationImplementation.AUTO,
      "ring": tf.distribute.experimental.CommunicationImplementation.RING,
      "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
  }[runtime.all_reduce_alg]
  return tf.distribute.experimental.CommunicationOptions(implementation=implementation)


def build_strategy(runtime: configs.RuntimeConfig) -> tf.distribute.Strategy:
  """Returns the strategy of runtime.distribution_strategy.

  one_device: /gpu:0 when num_gpus > 0, else /cpu:0.
  mirrored: all GPUs when num_gpus > 0, else every logical CPU device
    (`mirrored_strategy`: one per process and device set).
  multi_worker_mirrored: workers and this process's role from the TF_CONFIG
    environment variable.
  tpu: runtime.tpu names the TPU (grpc address or name; "" or "local" for a TPU VM).
  """
  name = runtime.distribution_strategy
  if name == "one_device":
    device = "/gpu:0" if runtime.num_gpus > 0 else "/cpu:0"
    return tf.distribute.OneDeviceStrategy(device)
  if name == "mirrored":
    if runtime.num_gpus > 0:
      return mirrored_strategy([f"/gpu:{i}" for i in range(runtime.num_gpus)])
    return mirrored_strategy([d.name for d in tf.config.list_logical_devices("CPU")])
  if name == "multi_worker_mirrored":
    return multi_worker_strategy(runtime)
  if name == "tpu":
    return build_tpu_strategy(runtime.tpu)
  raise configs.ConfigError(f"runtime.distribution_strategy: unknown '{name}'")


# The MirroredStrategy of each device set, built once per process.
_MIRRORED: Dict[Tuple[str, ...], tf.distribute.MirroredStrategy] = {}


def mirrored_strategy(devices: Sequence[str]) -> tf.distribute.MirroredStrategy:
  """The process's MirroredStrategy over `devices`, with TensorFlow's collective
  all-reduce (NCCL between GPUs, ring between logical CPU devices, the same code path).

  Built once per device set and shared by every Trainer of the process: each new
  MirroredStrategy numbers its collectives from the same first key, so a second one
  would reuse keys the first already used, and TF 2.21 then aborts every collective
  of the process ("Collective instance 100 expected type 0 ... but got type 2").
  """
  key = tuple(devices)
  if key not in _MIRRORED:
    _MIRRORED[key] = tf.distribute.MirroredStrategy(devices=list(devices))
  return _MIRRORED[key]


# The process's MultiWorkerMirroredStrategy, by runtime.all_reduce_alg.
_MULTI_WORKER: Dict[str, tf.distribute.MultiWorkerMirroredStrategy] = {}


def multi_worker_strategy(runtime: configs.RuntimeConfig
                          ) -> tf.distribute.MultiWorkerMirroredStrategy:
  """The process's MultiWorkerMirroredStrategy over the workers TF_CONFIG names, built
  once: it configures TensorFlow's collective ops, which TensorFlow allows only before
  its first op (so configure_runtime builds it, before the first log line lists the
  devices).

  Raises:
    ConfigError: TF_CONFIG is not set.
  """
  if "TF_CONFIG" not in os.environ:
    raise configs.ConfigError("runtime.distribution_strategy: multi_worker_mirrored needs "
                              "the TF_CONFIG environment variable (cluster and task)")
  key = runtime.all_reduce_alg
  if key not in _MULTI_WORKER:
    _MULTI_WORKER[key] = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=_communication_options(runtime))
  return _MULTI_WORKER[key]


def build_tpu_strategy(tpu: str) -> tf.distribute.TPUStrategy:
  """Connects to the TPU `tpu`, initializes it and returns a TPUStrategy."""
  resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
      tpu="" if tpu in ("", "local") else tpu)
  if tpu not in ("", "local"):
    tf.config.experimental_connect_to_cluster(resolver)
  tf.tpu.experimental.initialize_tpu_system(resolver)
  logging.info("TPU devices: %s", tf.config.list_logical_devices("TPU"))
  return tf.distribute.TPUStrategy(resolver)


def worker_placement(strategy: tf.distribute.Strategy) -> Tuple[int, int]:
  """(this process's number, how many processes train) under MultiWorkerMirroredStrategy:
  the "chief" task is 0 and the workers follow in task order (worker i is i + 1 where a
  chief exists, else i), as tf.distribute numbers its input pipelines; (0, 1) under
  every other strategy."""
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return 0, 1
  resolver = strategy.cluster_resolver
  cluster = resolver.cluster_spec().as_dict()
  chiefs = len(cluster.get("chief", []))
  count = chiefs + len(cluster.get("worker", []))
  if resolver.task_type in (None, "chief"):
    return 0, count
  return int(resolver.task_id) + chiefs, count
