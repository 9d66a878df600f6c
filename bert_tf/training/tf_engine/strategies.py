"""Device setup and the tf.distribute strategy a RuntimeConfig names.

`configure_runtime` must run before TensorFlow initializes its devices (before the
first op) when it splits the CPU into logical devices (later calls leave an existing
split alone) or trains on several workers (it builds MultiWorkerMirroredStrategy then).
"""

import logging
import os
import re
import zlib
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


def worker_barrier(strategy: tf.distribute.Strategy):
  """A function name -> None that returns once every worker has called it, each with
  the same name (one all-gather of the name's checksum, which every worker must call
  at the same point; elsewhere it returns at once).

  Raises (the function):
    RuntimeError: the workers called it with different names (e.g. at different steps).
  """
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return lambda name: None

  @tf.function
  def gather(value):
    def replica_fn(replica_value):
      return tf.distribute.get_replica_context().all_gather(
          tf.identity(replica_value)[tf.newaxis], axis=0)
    per_replica = strategy.run(replica_fn, args=(value,))
    return strategy.experimental_local_results(per_replica)[0]

  def barrier(name: str) -> None:
    # A CRC-32 is exact in float64, which every collective implementation reduces.
    mine = zlib.crc32(name.encode())
    others = gather(tf.constant(mine, tf.float64)).numpy()
    if (others != mine).any():
      raise RuntimeError(f"The workers reached different barriers: this one \"{name}\", "
                         "the others another")
  return barrier


# What TensorFlow's collectives say when a peer is gone (its process killed, its host
# lost): the collective is aborted, naming the peer's task where its health check found
# it down, or the socket's error.
_PEER_LOST = re.compile(r"Collective ops is aborted|is down|Connection reset by peer|"
                        r"Socket closed|failed to connect|Connection refused")
_TASK = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")


def lost_worker(strategy: tf.distribute.Strategy, error: BaseException) -> Optional[str]:
  """Under MultiWorkerMirroredStrategy, "worker N (/job:J/task:T)" where `error` is a
  collective aborted because a peer stopped answering (N as worker_placement numbers
  processes, the task as TF_CONFIG names it; "another worker" where TensorFlow does not
  name it and more than two train); None for any other error or strategy."""
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return None
  # A collective's error, not the input's (a remote read refused names no collective).
  if (not isinstance(error, tf.errors.OpError) or "collective" not in str(error).lower()
      or not _PEER_LOST.search(str(error))):
    return None
  resolver = strategy.cluster_resolver
  me = (resolver.task_type, int(resolver.task_id or 0))
  chiefs = len(resolver.cluster_spec().as_dict().get("chief", []))
  for job, task in _TASK.findall(str(error)):
    if (job, int(task)) != me:
      number = 0 if job == "chief" else int(task) + chiefs
      return f"worker {number} (/job:{job}/task:{task})"
  index, count = worker_placement(strategy)
  # Of two workers, the one lost is the other.
  return f"worker {1 - index}" if count == 2 else "another worker"


def peer_loss_reason(error: BaseException) -> str:
  """The line of a collective's error that says why it was aborted ("Collective ops is
  aborted by: ..."), not the graph's node and stack around it."""
  text = str(getattr(error, "message", None) or error)
  lines = [line for line in text.splitlines() if _PEER_LOST.search(line)]
  return " ".join((lines[0] if lines else text).split())[:300]
