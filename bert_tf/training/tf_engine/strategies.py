"""Device setup and the tf.distribute strategy a RuntimeConfig names.

`configure_runtime` must run before TensorFlow initializes its devices (before the
first op) when it splits the CPU into logical devices; later calls leave an existing
split alone.
"""

import logging
import os
from typing import Dict, Optional, Sequence, Tuple

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
    if "TF_CONFIG" not in os.environ:
      raise ValueError("distribution_strategy multi_worker_mirrored needs the TF_CONFIG "
                       "environment variable (cluster and task)")
    return tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=_communication_options(runtime))
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


def build_tpu_strategy(tpu: str) -> tf.distribute.TPUStrategy:
  """Connects to the TPU `tpu`, initializes it and returns a TPUStrategy."""
  resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
      tpu="" if tpu in ("", "local") else tpu)
  if tpu not in ("", "local"):
    tf.config.experimental_connect_to_cluster(resolver)
  tf.tpu.experimental.initialize_tpu_system(resolver)
  logging.info("TPU devices: %s", tf.config.list_logical_devices("TPU"))
  return tf.distribute.TPUStrategy(resolver)


def is_chief(strategy: Optional[tf.distribute.Strategy] = None) -> bool:
  """True on the process that writes checkpoints and summaries: the "chief" task, or
  worker 0 of a cluster without one; always True outside multi-worker training."""
  strategy = strategy or tf.distribute.get_strategy()
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return True
  resolver = strategy.cluster_resolver
  if resolver.task_type in (None, "chief"):
    return True
  has_chief = "chief" in resolver.cluster_spec().as_dict()
  return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def any_worker_flag(strategy: tf.distribute.Strategy):
  """A function flag -> whether any worker's flag is set: under
  MultiWorkerMirroredStrategy a sum of the workers' flags (one scalar all-reduce, which
  every worker must call at the same point), elsewhere the flag itself."""
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return bool

  @tf.function
  def any_worker_sets(flag):
    def replica_fn(replica_flag):
      # The identity places the value on the replica's device, which the collective
      # needs to know.
      return tf.distribute.get_replica_context().all_reduce(
          tf.distribute.ReduceOp.SUM, tf.identity(replica_flag))
    per_replica = strategy.run(replica_fn, args=(flag,))
    return strategy.experimental_local_results(per_replica)[0]

  return lambda flag: float(any_worker_sets(tf.constant(float(flag)))) > 0
