"""The one trainer: a training run over the engine of the Keras backend in use.

`Trainer` owns the run and writes every policy once, for both engines
(bert_tf.training.engine: TensorFlow's tf.distribute strategies, or JAX):
  - loops of at most trainer.steps_per_loop steps ending at the summary, log,
    checkpoint and validation intervals, their reports and TensorBoard scalars
    (bert_tf.training.host_loop);
  - checkpoints in one format that every engine reads (bert_tf.training.checkpointing):
    weights, optimizer state, step, random state and input position; a rerun resumes
    from the newest readable one, or warm-starts from task.init_checkpoint;
  - SIGTERM (a preemption notice): a checkpoint at the end of the current loop, then
    return; across processes every one stops at the same step;
  - a non-finite loss: NonFiniteLossError before any checkpoint of the bad steps is
    written (steps whose gradients or loss are not finite are skipped by the engine;
    under a dynamic float16 loss scale they only lower the scale);
  - a corrupt input record: one line naming the file and offset, after a checkpoint at
    the last finished step;
  - the input is checked before the first step (train_data.validate_inputs, the task's
    check), and params.yaml is written only once the configuration and the input are
    accepted (bert_tf.training.runs).
"""

import logging
import signal
from typing import Dict, Optional

from bert_tf import configs
from bert_tf.data.pipelines import loaders
from bert_tf.data.records import record_files
from bert_tf.tasks import base as task_base
from bert_tf.training import checkpointing
from bert_tf.training import engine as engine_lib
from bert_tf.training import evaluation
from bert_tf.training import host_loop
from bert_tf.training import run_checks
from bert_tf.training import runs
from bert_tf.training.summaries import SummaryWriter
from bert_tf.utils import errors
from bert_tf.utils.progress import StepLogger

NonFiniteLossError = host_loop.NonFiniteLossError


class Trainer:
  """Trains and evaluates one experiment's task.

  Args:
    experiment: the resolved ExperimentConfig.
    model_dir: checkpoints, params.yaml and TensorBoard logs (train/, eval/).
    task: defaults to the task experiment.task names.
    log_fn: receives each console line (default: logging at INFO).
    engine: defaults to the engine of Keras's backend (engine.build_engine); extra
      keyword arguments go to it (the TensorFlow engine takes `strategy`).

  Attributes: engine, task, model, optimizer, step (int), checkpoints (the
  CheckpointSaver), restored_from (the resumed checkpoint or None), initialized_from
  ({item: path} of a warm start from task.init_checkpoint), preempted (True once
  `train` stopped early on SIGTERM).
  """

  def __init__(self, experiment: configs.ExperimentConfig, model_dir: str,
               task: Optional[task_base.Task] = None, log_fn=None,
               engine: Optional[engine_lib.Engine] = None, **engine_args):
    self.experiment = experiment
    self.model_dir = model_dir
    self._log = log_fn or (lambda line: logging.info("%s", line))
    self.task = task or task_base.get_task(experiment)
    self.engine = engine or engine_lib.build_engine(experiment, self.task, self._log,
                                                    **engine_args)
    engine_lib.check_batch_sizes(experiment.train_data, self.engine.num_replicas,
                                 experiment.trainer.gradient_accumulation_steps)
    self.engine.build()
    self.checkpoints = checkpointing.CheckpointSaver(
        model_dir, experiment.trainer.max_to_keep, self.engine)
    self.is_chief = self.engine.is_chief
    self.restored_from = None
    self.initialized_from: Dict[str, str] = {}
    self.preempted = False
    # False when the saved input position belongs to another input shape.
    self.restore_input_position = True
    self._initialized = False
    self._input_started = False
    self._checked_inputs = set()
    self._stop_signal = None
    # (step, path) of the checkpoint last saved or restored.
    self._saved = None

  @property
  def model(self):
    return self.engine.model

  @property
  def optimizer(self):
    return self.engine.optimizer

  @property
  def step(self) -> int:
    return self.engine.step

  # ----- setup -----
  def initialize(self) -> None:
    """Resumes from model_dir's newest readable checkpoint (weights, optimizer state,
    step, random state; the input position when the input starts), or warm-starts from
    task.init_checkpoint when model_dir holds none."""
    if self._initialized:
      return
    latest = self.checkpoints.latest()
    if latest:
      self.checkpoints.restore(latest)
      self.restored_from = latest
      self._saved = (self.step, latest)
      self._log(f"Resumed from {latest} at step {self.step}")
    else:
      self.initialized_from = self.task.initialize(self.model)
      for item, path in self.initialized_from.items():
        self._log(f"Initialized {item} from {path}")
    self.engine.after_restore()
    self._initialized = True

  def check_inputs(self, section: str) -> None:
    """Checks the experiment's `section` (train_data or eval_data) once per run: a
    format the task reads (raw task files: with tensorflow-text installed), every
    record's checksums where validate_inputs, then the loader's check_files. The user errors
    of the last two are prefixed with the section."""
    if section in self._checked_inputs:
      return
    data_config = getattr(self.experiment, section)
    # Here, not when the input starts: a refused run must write nothing.
    loader = self.task.data_loader(data_config)
    if data_config.format not in loaders.PREPARED_FORMATS:
      loaders.require_tensorflow_text(data_config)
    try:
      if data_config.validate_inputs and data_config.format == loaders.TFRECORD:
        count = record_files.validate_record_files(data_config.input_path,
                                                    data_config.compression_type)
        self._log(f"{section}: every record of {count} file(s) read with valid checksums")
      loader.check_files()
    except errors.UserError as e:
      e.args = (f"{section}: {e}",)
      raise
    self._checked_inputs.add(section)

  # ----- training -----
  def train(self, train_steps: Optional[int] = None, evaluate_every: bool = False
            ) -> Dict[str, float]:
    """Trains to `train_steps` (default trainer.train_steps) global steps.

    Saves a checkpoint every trainer.checkpoint_interval steps and at the end, writes
    TensorBoard scalars every summary_interval steps, logs a progress line every
    log_interval steps, and with evaluate_every evaluates every validation_interval
    steps and at the end. SIGTERM saves a checkpoint at the end of the current loop and
    returns early with self.preempted set (on every process, whichever received it).

    Returns:
      the last report: averaged losses and metrics, learning_rate, gradient_norm,
      sequences_per_second, skipped_steps, plus eval/<metric> when evaluating.

    Raises:
      NonFiniteLossError: the loss became NaN or Inf (no checkpoint of those steps).
      CorruptRecordError or InputError: the input met a corrupt record (a checkpoint is
        written at the last finished step; the message names the file, offset and
        checkpoint), or train_data.validate_inputs found one before training.
    """
    config = self.experiment.trainer
    total = config.train_steps if train_steps is None else train_steps
    self.initialize()
    self.check_inputs("train_data")
    if not self._input_started:
      with checkpointing.local_input_positions(self.restored_from) as checkpoint:
        self.engine.start_training_input(self.step, checkpoint, self.restore_input_position)
      self._input_started = True
    writer = SummaryWriter(self.model_dir, "train", enabled=self.is_chief)
    global_batch = self.experiment.train_data.global_batch_size
    progress = StepLogger(total, global_batch, start_step=self.step, log_fn=self._log)
    self._log(f"Training {self.task.name} from step {self.step} to {total} with "
              f"{self.engine.describe()}, global batch {global_batch}")
    hooks = host_loop.LoopHooks(
        run_steps=self._run_steps, save=self.save, evaluate=self.evaluate,
        stop_requested=lambda: self.engine.any_process(self._stop_signal is not None),
        stop=self._stop)
    self._stop_signal = None
    try:
      with host_loop.sigterm_recorded(lambda signum: setattr(self, "_stop_signal", signum)):
        last_report, self.preempted = host_loop.train_loops(
            config, self.step, total, global_batch, evaluate_every, hooks, writer, progress,
            self.task.progress_metrics, self._log)
    finally:
      writer.close()
    self.engine.sync_to_model()
    return last_report

  def _run_steps(self, num_steps: int):
    try:
      totals = self.engine.run_steps(num_steps)
    except Exception as e:  # pylint: disable=broad-except
      corrupt = self.engine.corrupt_input_error(e, self.experiment.train_data)
      if corrupt is None:
        raise
      raise self._stop_on_corrupt_input(corrupt) from e
    step = self.step
    if totals.get("non_finite_loss_steps", 0) > 0:
      raise NonFiniteLossError(
          f"The training loss became NaN or Inf within steps {step - num_steps + 1}.."
          f"{step}; stopping. The weights were not updated on those steps and no "
          f"checkpoint was written after them; the latest good checkpoint is "
          f"{self.checkpoints.latest()}")
    return totals, step

  def _stop(self, step: int) -> str:
    path = self._checkpoint_now()
    received = (f"Received {signal.Signals(self._stop_signal).name}"
                if self._stop_signal is not None else "Another process received SIGTERM")
    return (f"{received}: saved checkpoint {path} at step {step}; stopping. Rerun the "
            "same command to resume.")

  def save(self) -> str:
    """Writes the checkpoint of the current step; returns its path."""
    path = self.checkpoints.save()
    self._saved = (self.step, path)
    return path

  def _checkpoint_now(self) -> str:
    """The checkpoint of the current step: the one this run saved or restored at it, or
    a new one. Every process decides alike (a save involves them all)."""
    if self._saved is not None and self._saved[0] == self.step:
      return self._saved[1]
    return self.save()

  def _stop_on_corrupt_input(self, corrupt: errors.UserError) -> errors.UserError:
    """Saves a checkpoint at the last finished step after the training input met a
    corrupt record; returns `corrupt` with a message naming the file, offset and
    checkpoint."""
    step = self.step
    path = self._checkpoint_now()
    corrupt.args = (f"train_data: {corrupt}. Saved checkpoint {path} at step {step}, the "
                    f"last finished step; replace or remove the file and rerun to resume.",)
    return corrupt

  # ----- evaluation -----
  def evaluate(self, steps: Optional[int] = None) -> Dict[str, float]:
    """Evaluates on eval_data; returns task.reduce_eval's metrics and writes them to
    TensorBoard under model_dir/eval (and the task's predictions, on the chief).

    Args:
      steps: batches to evaluate (default trainer.validation_steps; 0: all).
    """
    self.initialize()
    steps = self.experiment.trainer.validation_steps if steps is None else steps
    self.check_inputs("eval_data")
    data_config = self.experiment.eval_data
    try:
      gathered = self.engine.evaluate_outputs(data_config, steps)
    except Exception as e:  # pylint: disable=broad-except
      corrupt = self.engine.corrupt_input_error(e, data_config)
      if corrupt is None:
        raise
      raise corrupt from e
    return evaluation.report(self.task, gathered, self.model_dir, self.step,
                             self.is_chief, self._log)

  def predictions_dir(self, step: int) -> str:
    """Where the evaluation at `step` writes the task's prediction files."""
    return evaluation.predictions_dir(self.model_dir, step)


def run_experiment(experiment: configs.ExperimentConfig, model_dir: str, mode: str = "train",
                   log_fn=None, replace_params: bool = False, **engine_args
                   ) -> Dict[str, float]:
  """Trains and/or evaluates `experiment` in model_dir (bert_tf.training.runs: the
  input checked and params.yaml saved before training, the latest checkpoint resumed).

  Args:
    mode: "train", "eval" (the latest checkpoint in model_dir) or "train_and_eval".
    replace_params: replace a params.yaml that disagrees with `experiment`.
    engine_args: for the engine (the TensorFlow engine takes `strategy`).

  Returns:
    the final metrics (training report and/or evaluation metrics).
  """
  return runs.run_in_model_dir(
      experiment, model_dir, mode, replace_params,
      make_trainer=lambda: Trainer(experiment, model_dir, log_fn=log_fn, **engine_args),
      log_fn=log_fn)
