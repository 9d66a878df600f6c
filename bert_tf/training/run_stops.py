"""How a training run (bert_tf.training.trainer) stops before train_steps, each time with
the checkpoint a rerun resumes from, and the run's record of the checkpoints it saved:

  - SIGTERM (a preemption notice): a checkpoint at the end of the current loop, then
    return; across processes every one stops at the same step;
  - a non-finite loss: NonFiniteLossError before any checkpoint of the bad steps is
    written (steps whose gradients or loss are not finite are skipped by the engine;
    under a dynamic float16 loss scale they only lower the scale);
  - a corrupt input record: one line naming the file and offset, after a checkpoint at
    the last finished step;
  - a lost process: one line naming it, why, and the checkpoint every process resumes
    from (bert_tf.training.checkpoint_parts.lost_process_error);
  - any other error: the checkpoint being written is waited for and those committed are
    logged; that write's failure is logged after them, not raised.

A checkpoint is logged once committed (a background write once it is in place, not when
it starts).
"""

import signal
from typing import Callable, Dict, Optional

from bert_tf import configs
from bert_tf.training import checkpoint_errors
from bert_tf.training import checkpoint_parts
from bert_tf.training import checkpointing
from bert_tf.training import host_loop
from bert_tf.utils import errors


class RunStops:
  """The checkpoints of one training run as its loops take them, and its stops.

  Args:
    checkpoints: the run's CheckpointSaver (its engine and training input).
    data_config: the training input's configuration (train_data).
    log_fn: receives each console line.

  Attributes: saved ((step, path) of the checkpoint last saved or restored, or None),
  signal (the number of the signal received, or None).
  """

  def __init__(self, checkpoints: checkpointing.CheckpointSaver,
               data_config: configs.DataConfig, log_fn: Callable[[str], None]):
    self.checkpoints = checkpoints
    self._engine = checkpoints.engine
    self._data_config = data_config
    self._log = log_fn
    self.saved = None
    self.signal = None

  def record_signal(self, signum: int) -> None:
    """Records SIGTERM (host_loop.sigterm_recorded): the run stops at the end of the loop."""
    self.signal = signum

  def save(self) -> str:
    """Saves the checkpoint of the current step (CheckpointSaver.save); returns its path."""
    path = self.checkpoints.save()
    self.saved = (self._engine.step, path)
    return path

  def log_committed(self, wait: bool = False) -> None:
    """Logs each checkpoint committed since the last call; `wait`: waits for the one
    being written first. A background write that failed is raised here (after each
    loop), not only at the next save.

    Raises:
      CheckpointWriteError: the last write failed (naming it and the newest committed
        checkpoint).
    """
    if wait or not self.checkpoints.writing:
      self.checkpoints.wait()
    for path in self.checkpoints.committed():
      self._log(f"Saved checkpoint {path}")

  def run_steps(self, num_steps: int) -> Dict[str, float]:
    """The engine's summed outputs of num_steps training steps.

    Raises:
      NonFiniteLossError: the loss became NaN or Inf within them (naming the latest good
        checkpoint).
      CorruptRecordError or InputError: the input met a corrupt record (stop_on_corrupt_input).
    """
    try:
      totals = self._engine.run_steps(num_steps)
    except Exception as e:  # pylint: disable=broad-except
      corrupt = self.checkpoints.input_source.corrupt_record_error(e, self._data_config)
      if corrupt is None:
        raise
      raise self._stop_on_corrupt_input(corrupt) from e
    step = self._engine.step
    if totals.get("non_finite_loss_steps", 0) > 0:
      raise host_loop.NonFiniteLossError(
          f"The training loss became NaN or Inf within steps {step - num_steps + 1}.."
          f"{step}; stopping. The weights were not updated on those steps and no "
          f"checkpoint was written after them; the latest good checkpoint is "
          f"{self.checkpoints.latest()}")
    return totals

  def stop(self, step: int) -> str:
    """Saves the checkpoint of `step` (where none is) on SIGTERM, received by this
    process or another; returns the line that says so."""
    path = self._checkpoint_now()
    self.log_committed(wait=True)
    received = (f"Received {signal.Signals(self.signal).name}"
                if self.signal is not None else "Another process received SIGTERM")
    return (f"{received}: saved checkpoint {path} at step {step}; stopping. Rerun the "
            "same command to resume.")

  def lost_process_message(self, lost: str, reason: str) -> str:
    """The line of a run whose process `lost` stopped answering
    (ProcessGroup.end_on_lost_process)."""
    return str(checkpoint_parts.lost_process_error(self.checkpoints.model_dir, lost, reason))

  def after_error(self, error: BaseException) -> Optional[errors.UserError]:
    """Once `error` ended the training loops: waits for the checkpoint being written (a
    process lost: without waiting for its part) and logs those committed; returns the
    error to raise instead where a process of the run was lost, else None."""
    processes = self._engine.processes
    lost = processes.lost_process(error) if isinstance(error, Exception) else None
    if lost:
      self.checkpoints.stop_waiting_for_parts()
    self._finish_saving_quietly()
    if lost:
      return checkpoint_parts.lost_process_error(
          self.checkpoints.model_dir, lost, processes.lost_process_reason(error))
    return None

  def _finish_saving_quietly(self) -> None:
    """Waits for the checkpoint being written while another error ends the run and logs
    those committed; that write's failure is logged after them, not raised."""
    try:
      self.checkpoints.wait()
    except checkpoint_errors.CheckpointWriteError as e:
      self.log_committed()
      self._log(str(e))
    self.log_committed()

  def _checkpoint_now(self) -> str:
    """The checkpoint of the current step: the one this run saved or restored at it, or
    a new one. Every process decides alike (a save involves them all)."""
    if self.saved is not None and self.saved[0] == self._engine.step:
      return self.saved[1]
    return self.save()

  def _stop_on_corrupt_input(self, corrupt: errors.UserError) -> errors.UserError:
    """Saves a checkpoint at the last finished step after the training input met a
    corrupt record; returns `corrupt` with a message naming the file, offset and
    checkpoint."""
    step = self._engine.step
    path = self._checkpoint_now()
    self.log_committed(wait=True)
    corrupt.args = (f"train_data: {corrupt}. Saved checkpoint {path} at step {step}, the "
                    f"last finished step; replace or remove the file and rerun to resume.",)
    return corrupt
