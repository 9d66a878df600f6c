"""The processes of one run, as the Trainer sees them: how they agree, and how the loss
of one of them is told.

Every process of a run trains the same steps; where several train (a
MultiWorkerMirroredStrategy, jax.distributed), they agree at the same points of the run
(whether any received SIGTERM or was refused model_dir's lock; that a checkpoint's
parts are written) and report a process that stopped answering in one line. An engine
holds its group as `Engine.processes`; this class is the group of one process, which
each engine's own group extends:

  bert_tf.training.tf_engine.process_group.TensorFlowProcessGroup   the workers of a
      MultiWorkerMirroredStrategy (collectives of tf.distribute);
  bert_tf.training.jax_engine.process_group.JaxProcessGroup         the processes of
      jax.distributed (its collectives and the heartbeats of
      bert_tf.training.jax_engine.devices).
"""

from typing import Callable, Optional


class ProcessGroup:
  """The processes of a run that train together; this one alone by default.

  Every process calls `any_process` and `barrier` at the same points of the run, in
  the same order.
  """

  def any_process(self, flag: bool) -> bool:
    """Whether any process's flag is set (every process calls it at the same point)."""
    return flag

  def barrier(self, name: str) -> None:
    """Returns once every process has arrived here, each with the same `name`."""
    del name

  def lost_process(self, error: BaseException) -> Optional[str]:
    """The process whose loss `error` reports ("worker 1 (/job:worker/task:1)"), where it
    says a process of the run stopped answering; None for any other error."""
    del error
    return None

  def lost_process_reason(self, error: BaseException) -> str:
    """What `error` (see lost_process) says of the loss, in one line."""
    return " ".join(str(error).split())[:300]

  def end_on_lost_process(self, message: Callable[[str, str], str]) -> None:
    """Where the group learns of a lost process outside the run's calls (while the run
    waits in a collective that never returns), it ends this process with the one line
    message(lost, reason) (bert_tf.utils.errors.end_process); by default nothing: such
    a loss surfaces as an error of the run's call (lost_process)."""
    del message
