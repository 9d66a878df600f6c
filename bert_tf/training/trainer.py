"""The one trainer: a training run over the engine of the Keras backend in use.

`Trainer` owns the run and writes every policy once, for both engines
(bert_tf.training.engine: TensorFlow's tf.distribute strategies, or JAX):
  - the run in model_dir (`Trainer.run(mode)`): params.yaml checked and written
    (bert_tf.training.params_file), train, eval or train_and_eval;
  - loops of at most trainer.steps_per_loop steps ending at the summary, log,
    checkpoint and validation intervals, their reports and TensorBoard scalars;
  - checkpoints in one format that every engine reads (bert_tf.training.checkpointing):
    weights, optimizer state, step, random state and input position, written in the
    background while training goes on (train returns or raises once the last one is
    committed); a rerun resumes from the newest readable one, or warm-starts from
    task.init_checkpoint;
  - the run's stops (bert_tf.training.run_stops): SIGTERM (a checkpoint at the end of
    the current loop, then return, on every process at the same step), a non-finite
    loss, a corrupt input record, a lost process, each naming the checkpoint to resume;
  - nothing written before the configuration and the input are accepted; then, on a
    full disk, room made (CheckpointSaver.make_room) before the first write.
"""

import logging
import os
import time
from typing import Dict, Optional, Tuple

from bert_tf import configs
from bert_tf.tasks import base as task_base
from bert_tf.training import backends
from bert_tf.training import checkpointing
from bert_tf.training import engine as engine_lib
from bert_tf.training import evaluation
from bert_tf.training import host_loop
from bert_tf.training import input_source
from bert_tf.training import run_checks
from bert_tf.training import params_file
from bert_tf.training import reports
from bert_tf.training import run_lock
from bert_tf.training import run_stops
from bert_tf.training import schedules
from bert_tf.training.summaries import SummaryWriter
from bert_tf.utils import errors
from bert_tf.utils import files
from bert_tf.utils import range_reads
from bert_tf.utils.progress import StepLogger

MODES = ("train", "eval", "train_and_eval")


class Trainer:
  """Trains and evaluates one experiment's task.

  Args:
    experiment: the resolved ExperimentConfig.
    model_dir: checkpoints, params.yaml and TensorBoard logs (train/, eval/).
    task: defaults to the task experiment.task names.
    log_fn: receives each console line (default: logging at INFO).
    engine: defaults to the engine of Keras's backend (backends.engine_class); extra
      keyword arguments go to it (the TensorFlow engine takes `strategy`).

  Attributes: engine (built, its model and optimizer made, on first use), task, model,
  optimizer, step (int), input (the InputSource of the training input), checkpoints
  (the CheckpointSaver), restored_from (the resumed checkpoint or None),
  initialized_from ({item: path} of a warm start from task.init_checkpoint), preempted
  (True once `train` stopped early on SIGTERM).
  """

  def __init__(self, experiment: configs.ExperimentConfig, model_dir: str,
               task: Optional[task_base.Task] = None, log_fn=None,
               engine: Optional[engine_lib.Engine] = None, **engine_args):
    self.experiment = experiment
    self.model_dir = model_dir
    self._log = log_fn or (lambda line: logging.info("%s", line))
    self._warn = log_fn or (lambda line: logging.warning("%s", line))
    self.task = task or task_base.get_task(experiment)
    self._engine = engine or backends.engine_class()(experiment, self.task, self._log,
                                                     **engine_args)
    self._built = False
    placement = self._engine.placement
    configs.check_batch_sizes(experiment.train_data.global_batch_size,
                              placement.num_replicas,
                              experiment.trainer.gradient_accumulation_steps)
    self.input = input_source.InputSource(self._engine.training_input(),
                                          placement.process_index, self._log,
                                          input_source.order_of(experiment))
    self.checkpoints = checkpointing.CheckpointSaver(
        model_dir, experiment.trainer.max_to_keep, self._engine,
        background=experiment.trainer.async_checkpoints, input_source=self.input)
    self.is_chief = placement.is_chief
    self.restored_from = None
    self.initialized_from: Dict[str, str] = {}
    self.preempted = False
    # False when the saved input position belongs to another input shape.
    self.restore_input_position = True
    self._initialized = False
    self._checked_inputs = set()
    # The checkpoints this run saves and logs, and its stops (SIGTERM, errors).
    self._stops = run_stops.RunStops(self.checkpoints, experiment.train_data, self._log)
    # model_dir's lock while this run trains there.
    self._hold = run_lock.RunHold(model_dir, self.is_chief,
                                  self._engine.processes.any_process, self._log,
                                  on_change=self.checkpoints.forget_listing)

  @property
  def engine(self) -> engine_lib.Engine:
    """The engine, built (its model and optimizer made) on first use: `run` checks what
    needs no model before."""
    if not self._built:
      self._engine.build()
      self._built = True
    return self._engine

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
  def initialize(self, latest: Optional[str] = None, weights_only: bool = False) -> None:
    """Resumes from `latest` (None: model_dir's newest readable checkpoint): weights,
    optimizer state, step, random state; the input position when the input starts
    (`weights_only`: the weights and step, for an evaluation). Warm-starts from
    task.init_checkpoint when model_dir holds none."""
    if self._initialized:
      return
    engine = self.engine  # built before the checkpoint restores into it
    latest = latest or self.checkpoints.latest()
    if latest:
      self.checkpoints.restore(latest, weights_only=weights_only)
      self.restored_from = latest
      self._stops.saved = (self.step, latest)
      self._log(f"Resumed from {latest} at step {self.step}")
    else:
      self.initialized_from = self.task.initialize(self.model)
      for item, path in self.initialized_from.items():
        self._log(f"Initialized {item} from {path}")
    # The checkpoint's local copy (of a remote one) is not read again.
    range_reads.release_local_copy()
    engine.state_restored()
    self._initialized = True

  def check_inputs(self, section: str) -> None:
    """Checks the experiment's `section` (train_data or eval_data) once per run
    (run_checks.check_input)."""
    if section not in self._checked_inputs:
      run_checks.check_input(self.task, getattr(self.experiment, section), section,
                             self._log)
      self._checked_inputs.add(section)

  # ----- a run in model_dir -----
  def run(self, mode: str = "train", replace_params: bool = False) -> Dict[str, float]:
    """Runs `mode` in model_dir: checks, then builds the model, restores model_dir's
    checkpoint, saves params.yaml (a training's chief) and trains and/or evaluates.

    Nothing is written, and no model built, before every check passed: model_dir takes
    writes (files.check_writable), the remote paths read answer
    (run_checks.check_remote_paths), the vocab fits the model, the input is readable
    (check_inputs) and an existing params.yaml fixes the same shapes
    (params_file.check_params_match; replace_params replaces it). params.yaml records
    what the input files fix and the configuration left unset (the loader's
    settings_from_files). A training run warns once for each setting longer than the
    run, and where a resumed run's schedule differs from the recorded one.

    Args:
      mode: "train", "eval" (the latest checkpoint in model_dir) or "train_and_eval".
      replace_params: replace a params.yaml that disagrees with the experiment.

    Returns:
      the final metrics (training report and/or evaluation metrics).
    """
    if mode not in MODES:
      raise ValueError(f"mode must be train, eval or train_and_eval, got '{mode}'")
    files.check_writable(self.model_dir)
    if mode == "eval":  # reads checkpoints, writes no checkpoint: beside a training run
      return self._run(mode, replace_params)
    with self._hold.held():
      return self._run(mode, replace_params)

  def _run(self, mode: str, replace_params: bool) -> Dict[str, float]:
    experiment, model_dir = self.experiment, self.model_dir
    sections = {"train": ("train_data",), "eval": ("eval_data",),
                "train_and_eval": ("train_data", "eval_data")}[mode]
    run_checks.check_remote_paths(experiment, sections)
    recorded = params_file.recorded_params(model_dir, replace_params)
    differing = params_file.check_params_match(experiment, model_dir, recorded, replace_params)
    run_checks.check_vocab_size(experiment)
    # The saved input position is one of batches of the old data shapes.
    self.restore_input_position = not any(k.startswith("train_data.") for k in differing)
    latest = self.checkpoints.latest() if mode == "eval" else None
    if mode == "eval" and latest is None:
      raise errors.MissingInputError(f"--mode=eval needs a checkpoint in {model_dir}")
    to_record = experiment
    for section in sections:
      self.check_inputs(section)
      inferred = self.task.data_loader(getattr(experiment, section)).settings_from_files()
      if inferred:
        to_record = to_record.override(inferred)
    # Only now, once every check that needs no model passed, is the model built.
    self.initialize(latest, weights_only=(mode == "eval"))
    if mode != "eval" and self.is_chief:
      resumed_at = self.step if self.restored_from else None
      for line in run_checks.run_warnings(experiment, recorded, resumed_at,
                                          os.path.join(model_dir, params_file.PARAMS_FILE)):
        self._warn(line)
    if mode == "eval":  # leaves params.yaml as the training wrote it
      return self.evaluate()
    if self.is_chief:
      self._make_room(experiment.trainer.train_steps)
      files.make_dirs(model_dir)
      params_file.record(to_record, model_dir)
    return self.train(evaluate_every=(mode == "train_and_eval"))

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
      sequences_per_second, plus eval/<metric> when evaluating (the step counts,
      skipped_steps and non_finite_loss_steps, are not averaged into it).

    Raises:
      NonFiniteLossError: the loss became NaN or Inf (no checkpoint of those steps).
      CorruptRecordError or InputError: the input met a corrupt record (a checkpoint is
        written at the last finished step; the message names the file, offset and
        checkpoint), or train_data.validate_inputs found one before training.
    """
    with self._hold.held():
      return self._train(train_steps, evaluate_every)

  def _train(self, train_steps: Optional[int], evaluate_every: bool) -> Dict[str, float]:
    config = self.experiment.trainer
    total = config.train_steps if train_steps is None else train_steps
    self.initialize()
    self.check_inputs("train_data")
    self._make_room(total)
    if not self.input.started:
      self.input.start(self.step, self.restored_from, self.restore_input_position)
    writer = SummaryWriter(self.model_dir, "train", enabled=self.is_chief)
    global_batch = self.experiment.train_data.global_batch_size
    progress = StepLogger(total, global_batch, start_step=self.step, log_fn=self._log)
    self._log(f"Training {self.task.name} from step {self.step} to {total} with "
              f"{self.engine.placement.description}, global batch {global_batch}")
    self._stops.signal = None
    self._engine.processes.end_on_lost_process(self._stops.lost_process_message)
    try:
      with host_loop.sigterm_recorded(self._stops.record_signal):
        last_report, self.preempted = self._train_loops(total, evaluate_every, writer,
                                                        progress)
    except BaseException as e:  # pylint: disable=broad-except
      instead = self._stops.after_error(e)
      if instead is not None:
        raise instead from e
      raise
    finally:
      writer.close()
    self._stops.log_committed(wait=True)
    self.engine.checkpoint_state()  # the model's variables hold the trained values
    return last_report

  def _train_loops(self, total: int, evaluate_every: bool, writer, progress
                   ) -> Tuple[Dict[str, float], bool]:
    """Trains from the current step to `total` in loops of at most steps_per_loop
    steps, each ending at the next summary, log, checkpoint (and validation) interval;
    returns (the last report, whether it stopped early on SIGTERM).

    The report averages the losses and metrics of the last summary window (plus
    eval/<metric> after an evaluation); `progress` (a StepLogger) shows the task's
    progress_metrics of each log window.
    """
    config = self.experiment.trainer
    intervals = [config.summary_interval, config.log_interval, config.checkpoint_interval]
    if evaluate_every:
      intervals.append(config.validation_interval)
    # The schedule both engines' optimizers are built with.
    schedule = schedules.for_run(self.experiment.optimizer, config.train_steps)
    reported = reports.LoopReports(config, total, self.experiment.train_data.global_batch_size,
                                   writer, progress, self.task.progress_metrics,
                                   rate_at=lambda step: schedules.rate_at(schedule, step))
    step, first_call = self.step, True
    while step < total:
      num_steps = host_loop.next_loop_length(step, total, config.steps_per_loop, intervals)
      start = time.time()
      totals = self._stops.run_steps(num_steps)
      self._hold.check()
      self._stops.log_committed()
      step = self.step
      # The first loop's time includes compilation: it is left out of the rates.
      reported.add(step, totals, num_steps, None if first_call else time.time() - start)
      first_call = False
      if step % config.checkpoint_interval == 0 or step == total:
        self.save()
        # A write on this thread is committed already; a background one is logged later.
        self._stops.log_committed()
      if evaluate_every and (step % config.validation_interval == 0 or step == total):
        reported.last.update({f"eval/{k}": v for k, v in self.evaluate().items()})
      # Every process asks, whichever received SIGTERM: they stop at the same step.
      if step < total and self.engine.processes.any_process(self._stops.signal is not None):
        self._log(self._stops.stop(step))
        return reported.latest(), True
    return reported.last, False

  def _make_room(self, total: int) -> None:
    """On the chief of a run that will save (its step is short of `total`): room for
    what it writes first, on a full disk (CheckpointSaver.make_room)."""
    if self.is_chief and self.step < total:
      self.checkpoints.make_room()

  def save(self) -> str:
    """Saves the checkpoint of the current step; returns its path. Under
    trainer.async_checkpoints it is still being written on return: checkpoints.wait()
    returns once it is committed."""
    return self._stops.save()

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
      corrupt = self.input.corrupt_record_error(e, data_config)
      if corrupt is None:
        raise
      corrupt.args = (f"eval_data: {corrupt}",)
      raise corrupt from e
    return evaluation.report(self.task, gathered, self.model_dir, self.step,
                             self.is_chief, self._log)


def run_experiment(experiment: configs.ExperimentConfig, model_dir: str, mode: str = "train",
                   log_fn=None, replace_params: bool = False, **engine_args
                   ) -> Dict[str, float]:
  """Trains and/or evaluates `experiment` in model_dir (Trainer.run) on the engine of
  Keras's backend, after setting up its devices and a first log line naming them
  (backends.start_runtime; params.yaml records the backend in use).

  Args:
    mode: "train", "eval" (the latest checkpoint in model_dir) or "train_and_eval".
    log_fn: receives each console line (default: logging; warnings at WARNING).
    replace_params: replace a params.yaml that disagrees with `experiment`.
    engine_args: for the engine (the TensorFlow engine takes `strategy`).

  Returns:
    the final metrics (training report and/or evaluation metrics).

  Raises:
    ConfigError: runtime.backend names another backend than Keras runs on, or a
      setting the engine does not have (TPUStrategy on JAX).
  """
  experiment = backends.start_runtime(
      experiment, log_fn or (lambda line: logging.info("%s", line)))
  trainer = Trainer(experiment, model_dir, log_fn=log_fn, **engine_args)
  return trainer.run(mode, replace_params=replace_params)
