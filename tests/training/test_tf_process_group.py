"""The workers of a MultiWorkerMirroredStrategy as the run's process group
(bert_tf.training.tf_engine.process_group): a collective aborted because a peer stopped
answering names that worker; every other strategy is one process. (Two workers that
agree and one that is lost: tests/training/test_strategies.py,
tests/integration/test_multi_worker_checkpoints.py.)"""

import tensorflow as tf

from bert_tf.training import process_group
from bert_tf.training.tf_engine import process_group as tf_processes

_ABORTED = ("Collective ops is aborted by: task /job:worker/replica:0/task:1 is down\n"
            "\t [[node CollectiveReduceV2]]")


class _Resolver:
  task_type, task_id = "worker", 0

  def cluster_spec(self):
    return tf.train.ClusterSpec({"worker": ["127.0.0.1:1", "127.0.0.1:2"]})


class _TwoWorkers(tf.distribute.MultiWorkerMirroredStrategy):
  """Worker 0 of two, as lost_process sees a strategy (its cluster, no collectives)."""

  def __init__(self):  # pylint: disable=super-init-not-called
    pass

  cluster_resolver = _Resolver()


def test_other_strategies_train_in_one_process():
  processes = tf_processes.for_strategy(tf.distribute.OneDeviceStrategy("/cpu:0"))
  assert type(processes) is process_group.ProcessGroup  # pylint: disable=unidiomatic-typecheck
  assert processes.any_process(True) and not processes.any_process(False)


def test_an_aborted_collective_names_the_lost_worker_and_its_reason_in_one_line():
  processes = tf_processes.TensorFlowProcessGroup(_TwoWorkers())
  error = tf.errors.UnavailableError(None, None, "Collective ops is aborted\n" + _ABORTED)
  assert processes.lost_process(error) == "worker 1 (/job:worker/task:1)"
  assert processes.lost_process_reason(error) == "Collective ops is aborted"
  # Not a collective's error: a read of the input that was refused.
  refused = tf.errors.UnavailableError(None, None, "Connection refused: gs://b/x")
  assert processes.lost_process(refused) is None
