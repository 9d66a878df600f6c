"""The workers of a MultiWorkerMirroredStrategy as the run's process group: they agree
with tf.distribute's collectives, and a worker that stopped answering is named from the
collective's error.

They agree on a flag (SIGTERM received, the lock refused) with an all-reduce of their
flags, and at a checkpoint's barriers with an all-gather of the checksum of its name
(the step), so that every worker saves the same step. Every other strategy trains in one
process (process_group.ProcessGroup).
"""

import re
import zlib
from typing import Optional

import tensorflow as tf

from bert_tf.training import process_group
from bert_tf.training.tf_engine import strategies

# What TensorFlow's collectives say when a peer is gone (its process killed, its host
# lost): the collective is aborted, naming the peer's task where its health check found
# it down, or the socket's error.
_PEER_LOST = re.compile(r"Collective ops is aborted|is down|Connection reset by peer|"
                        r"Socket closed|failed to connect|Connection refused")
_TASK = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")


def for_strategy(strategy: tf.distribute.Strategy) -> process_group.ProcessGroup:
  """The process group of `strategy`: its workers under MultiWorkerMirroredStrategy,
  this process alone under every other."""
  if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return TensorFlowProcessGroup(strategy)
  return process_group.ProcessGroup()


class TensorFlowProcessGroup(process_group.ProcessGroup):
  """The workers of a MultiWorkerMirroredStrategy (see the module docstring)."""

  def __init__(self, strategy: tf.distribute.MultiWorkerMirroredStrategy):
    self._strategy = strategy

    def run_on_replicas(fn, value):
      per_replica = strategy.run(fn, args=(value,))
      return strategy.experimental_local_results(per_replica)[0]

    @tf.function
    def summed(flag):
      # The identity places the value on the replica's device, which the collective
      # needs to know.
      return run_on_replicas(lambda replica_flag: tf.distribute.get_replica_context()
                             .all_reduce(tf.distribute.ReduceOp.SUM,
                                         tf.identity(replica_flag)), flag)

    @tf.function
    def gathered(value):
      return run_on_replicas(lambda replica_value: tf.distribute.get_replica_context()
                             .all_gather(tf.identity(replica_value)[tf.newaxis], axis=0),
                             value)

    self._summed, self._gathered = summed, gathered

  def any_process(self, flag: bool) -> bool:
    """A sum of the workers' flags: one scalar all-reduce, which every worker calls at
    the same point."""
    return float(self._summed(tf.constant(float(flag)))) > 0

  def barrier(self, name: str) -> None:
    """One all-gather of the CRC-32 of `name`, which every worker calls at the same point.

    Raises:
      RuntimeError: the workers called it with different names (e.g. at different
        steps).
    """
    # A CRC-32 is exact in float64, which every collective implementation reduces.
    mine = zlib.crc32(name.encode())
    others = self._gathered(tf.constant(mine, tf.float64)).numpy()
    if (others != mine).any():
      raise RuntimeError(f"The workers reached different barriers: this one \"{name}\", "
                         "the others another")

  def lost_process(self, error: BaseException) -> Optional[str]:
    """"worker N (/job:J/task:T)" where `error` is a collective aborted because a peer
    stopped answering (N as strategies.worker_placement numbers processes, the task as
    TF_CONFIG names it; "another worker" where TensorFlow does not name it and more than
    two train); None for any other error."""
    # A collective's error, not the input's (a remote read refused names no collective).
    if (not isinstance(error, tf.errors.OpError) or "collective" not in str(error).lower()
        or not _PEER_LOST.search(str(error))):
      return None
    resolver = self._strategy.cluster_resolver
    me = (resolver.task_type, int(resolver.task_id or 0))
    chiefs = len(resolver.cluster_spec().as_dict().get("chief", []))
    for job, task in _TASK.findall(str(error)):
      if (job, int(task)) != me:
        number = 0 if job == "chief" else int(task) + chiefs
        return f"worker {number} (/job:{job}/task:{task})"
    index, count = strategies.worker_placement(self._strategy)
    # Of two workers, the one lost is the other.
    return f"worker {1 - index}" if count == 2 else "another worker"

  def lost_process_reason(self, error: BaseException) -> str:
    """The line of a collective's error that says why it was aborted ("Collective ops is
    aborted by: ..."), not the graph's node and stack around it."""
    text = str(getattr(error, "message", None) or error)
    lines = [line for line in text.splitlines() if _PEER_LOST.search(line)]
    return " ".join((lines[0] if lines else text).split())[:300]
