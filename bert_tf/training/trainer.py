"""The TensorFlow trainer: `strategy.run` inside `tf.function`, several steps per call.

Not `Model.fit`: with TF 2.21 and Keras 3.15 `fit` fails under
MultiWorkerMirroredStrategy (keras-team/keras#20585), while this loop runs the same
code under OneDevice, Mirrored, MultiWorkerMirrored and TPU strategies.

Its parts: the input and its checkpointed position (tf_input), the step and its loop of
several steps per call (tf_step), the host loop with its intervals, reports and SIGTERM
(host_loop, shared with the JAX trainer), evaluation (evaluation) and the run in its
model_dir (runs). `Trainer` holds the model, optimizer and checkpoint and joins them.

After a loop whose loss was not finite it raises NonFiniteLossError before any
checkpoint is written, so the last checkpoint on disk holds the last good weights;
under mixed_float16 a non-finite loss is a float16 overflow that skips the step and
halves the loss scale, and stops training only at the smallest scale. Where the step is
compiled once per shape (XLA, TPU), batches cut to their longest example are padded to
the length buckets instead.

What a checkpoint holds, so that a resumed run continues the uninterrupted one: the
model's items, the optimizer, the step, the random state (the state of every Keras
SeedGenerator, which the dropout masks draw from) and, under OneDevice and Mirrored
strategies, the training input iterator.

SIGTERM (a preemption notice) makes `train` save a checkpoint at the end of the
current loop of at most trainer.steps_per_loop steps and return; a rerun resumes there.
Under MultiWorkerMirroredStrategy the workers first agree (an all-reduce of their stop
flags at every loop boundary), so that all save the same step and stop together.
"""

import logging
import signal
from typing import Dict, Optional

import keras
import tensorflow as tf

from bert_tf import configs
from bert_tf import kernels
from bert_tf.checkpoints import trackables
from bert_tf.tasks import base as task_base
from bert_tf.training import checkpoints
from bert_tf.training import host_loop
from bert_tf.training import runs
from bert_tf.training import strategies
from bert_tf.training import evaluation
from bert_tf.training import tf_input
from bert_tf.training import tf_step
from bert_tf.training.loss_scale import DynamicLossScale
from bert_tf.training.optimizers import build_optimizer
from bert_tf.utils import errors
from bert_tf.utils.progress import StepLogger
from bert_tf.training.summaries import SummaryWriter


class Trainer:
  """Trains and evaluates one experiment's task under a tf.distribute strategy.

  Args:
    experiment: the resolved ExperimentConfig.
    model_dir: checkpoints, params.yaml and TensorBoard logs (train/, eval/).
    strategy: defaults to the one experiment.runtime names.
    task: defaults to the task experiment.task names.
    log_fn: receives each console line (default: absl/std logging at INFO).

  Attributes after construction: model, optimizer, step (tf.Variable int64),
  inputs (tf_input.TrainerInput), checkpoint (tf.train.Checkpoint), restored_from (the
  resumed checkpoint or None), initialized_from ({item: path} of a warm start from
  task.init_checkpoint), preempted (True once `train` stopped early on SIGTERM).
  """

  def __init__(self, experiment: configs.ExperimentConfig, model_dir: str,
               strategy: Optional[tf.distribute.Strategy] = None,
               task: Optional[task_base.Task] = None, log_fn=None):
    self.experiment = experiment
    self.model_dir = model_dir
    self.strategy = strategy or strategies.build_strategy(experiment.runtime)
    self.task = task or task_base.get_task(experiment)
    self.is_chief = strategies.is_chief(self.strategy)
    self._log = log_fn or (lambda line: logging.info("%s", line))
    trainer_config = experiment.trainer
    self.accumulation_steps = trainer_config.gradient_accumulation_steps
    self._check_batch_sizes()
    self._is_tpu = isinstance(self.strategy, tf.distribute.TPUStrategy)
    self._check_static_shapes()
    self.inputs = tf_input.TrainerInput(self.strategy, self.task,
                                        self.pads_to_length_buckets, self._log)

    # The same seed gives the same initial weights under every strategy.
    keras.utils.set_random_seed(experiment.runtime.seed)
    with self.strategy.scope():
      self.model = self.task.build_tuned_model()
      self.optimizer = build_optimizer(experiment.optimizer, trainer_config.train_steps,
                                       jit_compile=not self._is_tpu)
      self.optimizer.build(self.model.trainable_variables)
      self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step",
                              aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
      self.loss_scale = None
      if experiment.runtime.mixed_precision_dtype == "mixed_float16":
        self.loss_scale = DynamicLossScale.from_string(experiment.runtime.loss_scale)

    self._train_step = tf_step.TrainStep(
        self.strategy, self.model, self.task, self.optimizer, self.step, self.loss_scale,
        global_batch_size=experiment.train_data.global_batch_size,
        global_clipnorm=experiment.optimizer.global_clipnorm,
        accumulation_steps=self.accumulation_steps, jit_compile=self.jit_compile,
        next_batch=self.inputs.next_batch,
        input_spec_fn=lambda: self.inputs.element_spec(experiment.train_data))
    self._train_iterator = None
    self._train_loop_fn = None
    self._eval_step_fn = None
    self.restored_from = None
    self.initialized_from: Dict[str, str] = {}
    self.checkpoint = None
    self._saver = None
    self._checkpoint_items: Dict[str, object] = {}
    self.preempted = False
    self._stop_signal = None
    self._any_worker_stops = strategies.any_worker_flag(self.strategy)
    # (step, prefix) of the checkpoint last saved or restored.
    self._saved = None
    # False when the checkpointed input iterator belongs to another input shape.
    self.restore_input_iterator = True

  # ----- setup -----
  def _check_batch_sizes(self):
    replicas = self.strategy.num_replicas_in_sync
    batch = self.experiment.train_data.global_batch_size
    if batch % replicas:
      raise configs.ConfigError(f"train_data.global_batch_size ({batch}) must be divisible "
                                f"by the number of replicas ({replicas})")
    per_replica = batch // replicas
    if per_replica % self.accumulation_steps:
      raise configs.ConfigError(
          f"The per-replica batch ({per_replica} = train_data.global_batch_size {batch} / "
          f"{replicas} replicas) must be divisible by trainer.gradient_accumulation_steps "
          f"({self.accumulation_steps})")

  @property
  def jit_compile(self) -> bool:
    """runtime.jit_compile, or where unset, whether the step runs on a GPU or TPU."""
    setting = self.experiment.runtime.jit_compile
    if setting is not None:
      return setting
    return self._is_tpu or bool(self.experiment.runtime.num_gpus) or (
        kernels.tensorflow_sees_accelerators())

  @property
  def pads_to_length_buckets(self) -> bool:
    """Whether training batches are padded to fixed lengths (seq_length or the length
    buckets) instead of to their longest example: where the step is compiled once per
    shape, under XLA (jit_compile) and on a TPU."""
    return self.jit_compile or self._is_tpu

  def _check_static_shapes(self):
    """Raises ConfigError for inputs whose shapes cannot be made static where the step
    compiles once per shape (see pads_to_length_buckets)."""
    where = "TPUStrategy" if self._is_tpu else "runtime.jit_compile"
    data = self.experiment.train_data
    if self._is_tpu and not data.drop_remainder:
      raise configs.ConfigError(f"{where} needs static shapes: set "
                                "train_data.drop_remainder=true")
    if self.pads_to_length_buckets and data.pack_examples:
      raise configs.ConfigError(
          f"{where} compiles the step once per shape, and train_data.pack_examples makes "
          "the number of rows vary from batch to batch: use train_data.length_buckets")

  def _ensure_train_iterator(self):
    """The training iterator, built at the current step (after `initialize`); a
    checkpointable one becomes a checkpoint item."""
    if self._train_iterator is None:
      self._train_iterator = self.inputs.training_iterator(
          self.experiment.train_data, int(self.step.numpy()), self.restored_from,
          restore_iterator=self.restore_input_iterator)
      if self.inputs.iterator_checkpointable:
        self._checkpoint_items["iterator"] = [self._train_iterator]
        self._build_checkpoint_object()
    return self._train_iterator

  def _build_checkpoint_object(self):
    """(Re)builds self.checkpoint and its saver over self._checkpoint_items."""
    self.checkpoint = tf.train.Checkpoint(**self._checkpoint_items)
    self._saver = checkpoints.CheckpointSaver(
        self.checkpoint, self.model_dir, self.experiment.trainer.max_to_keep, self.step,
        is_chief=self.is_chief, worker_index=strategies.worker_id())

  def initialize(self) -> None:
    """Resumes from model_dir's newest readable checkpoint (weights, optimizer slots,
    step, random state; the input position when the input is built), or warm-starts
    from task.init_checkpoint when model_dir holds none. Must run before the training
    input is built."""
    if self.checkpoint is not None:
      return
    items = trackables.as_trackables(self.model.trained_items)
    items.update(optimizer=self.optimizer, step=self.step)
    if self.loss_scale is not None:
      items["loss_scale"] = self.loss_scale
    random_state = tf_step.random_state(self.model)
    if random_state:
      items["random_state"] = random_state
    self._checkpoint_items = items
    self._build_checkpoint_object()
    self.restored_from = self._saver.restore_latest(items)
    if self.restored_from:
      self._saved = (int(self.step.numpy()), self.restored_from)
      self._log(f"Resumed from {self.restored_from} at step {int(self.step.numpy())}")
    else:
      self.initialized_from = self.task.initialize(self.model)
      for item, path in self.initialized_from.items():
        self._log(f"Initialized {item} from {path}")
    tf_step.seed_each_replica(self.strategy, random_state)

  # ----- the step -----
  @property
  def train_loop_function(self):
    """The tf.function running steps_per_loop steps (built on first use)."""
    if self._train_loop_fn is None:
      self._train_loop_fn = self._train_step.make_train_loop()
    return self._train_loop_fn

  def train_loop_concrete_function(self):
    """The traced training loop (for inspecting its graph)."""
    return self.train_loop_function.get_concrete_function(
        self._ensure_train_iterator(), tf.TensorSpec([], tf.int32))

  # ----- training -----
  def train(self, train_steps: Optional[int] = None, evaluate_every: bool = False
            ) -> Dict[str, float]:
    """Trains to `train_steps` (default trainer.train_steps) global steps.

    Saves a checkpoint every trainer.checkpoint_interval steps and at the end, writes
    TensorBoard scalars every summary_interval steps, logs a progress line every
    log_interval steps, and with evaluate_every evaluates every validation_interval
    steps and at the end.

    SIGTERM during training saves a checkpoint at the end of the current loop and
    returns early with self.preempted set (under MultiWorkerMirroredStrategy on every
    worker, whichever received it).

    Returns:
      the last report: averaged losses, accuracies, learning_rate, gradient_norm,
      sequences_per_second, plus eval/<metric> when evaluating.

    Raises:
      NonFiniteLossError: the loss became NaN or Inf (no checkpoint is written).
      CorruptRecordError: the input met a corrupt TFRecord (a checkpoint is written at
        the last finished step; the message names the file, offset and checkpoint), or
        train_data.validate_inputs found one before training.
    """
    config = self.experiment.trainer
    total = config.train_steps if train_steps is None else train_steps
    self.initialize()
    tf_input.check_inputs(self.experiment, self.task, "train_data", self._log)
    iterator = self._ensure_train_iterator()
    loop = self.train_loop_function
    writer = SummaryWriter(self.model_dir, "train", enabled=self.is_chief)
    global_batch = self.experiment.train_data.global_batch_size
    step = int(self.step.numpy())
    progress = StepLogger(total, global_batch, start_step=step, log_fn=self._log)
    self._log(f"Training {self.task.name} from step {step} to {total} with "
              f"{type(self.strategy).__name__} ({self.strategy.num_replicas_in_sync} "
              f"replicas), global batch {global_batch}")

    def run_steps(num_steps):
      try:
        totals = loop(iterator, tf.constant(num_steps, tf.int32))
        totals = {k: float(v) for k, v in totals.items()}
      except tf.errors.DataLossError as e:
        raise self._stop_on_corrupt_input(e) from e
      step = int(self.step.numpy())
      if totals["non_finite_loss_steps"] > 0:
        raise host_loop.NonFiniteLossError(
            f"The training loss became NaN or Inf within steps {step - num_steps + 1}.."
            f"{step}; stopping. The weights were not updated on those steps and no "
            f"checkpoint was written after them; the latest good checkpoint is "
            f"{self._saver.latest()}")
      return totals, step

    def stop(step):
      path = self._checkpoint_now()
      received = (f"Received {signal.Signals(self._stop_signal).name}"
                  if self._stop_signal is not None else "Another worker received SIGTERM")
      return (f"{received}: saved checkpoint {path} at step {step}; stopping. Rerun the "
              "same command to resume.")

    # Every worker asks at the same loop boundaries, and all get the same answer: all
    # save the same step together and stop.
    hooks = host_loop.LoopHooks(
        run_steps=run_steps, save=self._save, evaluate=self.evaluate,
        stop_requested=lambda: self._any_worker_stops(self._stop_signal is not None),
        stop=stop)
    self._stop_signal = None
    try:
      with host_loop.sigterm_recorded(lambda signum: setattr(self, "_stop_signal", signum)):
        last_report, self.preempted = host_loop.train_loops(
            config, step, total, global_batch, evaluate_every, hooks, writer, progress,
            self.task.progress_metrics, self._log)
    finally:
      writer.close()
    return last_report

  def _save(self) -> str:
    path = self._saver.save()
    self._saved = (int(self.step.numpy()), path)
    return path

  def _checkpoint_now(self) -> str:
    """The prefix of a checkpoint at the current step: the one this run saved or
    restored at it, or a new one. Every worker decides alike (a save may be collective)."""
    step = int(self.step.numpy())
    if self._saved is not None and self._saved[0] == step:
      return self._saved[1]
    return self._save()

  def _stop_on_corrupt_input(self, error: tf.errors.DataLossError) -> Exception:
    """Saves a checkpoint at the last finished step after the training input met a
    corrupt record; returns the error to raise, naming the file, the byte offset and the
    checkpoint."""
    explained = self.task.explain_input_error(error, self.experiment.train_data)
    step = int(self.step.numpy())
    path = self._checkpoint_now()
    if explained is error:
      found = (f"{' '.join(error.message.split())} (every file of train_data.input_path "
               f"reads in full when read again)")
    else:
      found = str(explained)
    message = (f"train_data: {found}. Saved checkpoint {path} at step {step}, the last "
               f"finished step; replace or remove the file and rerun to resume.")
    if isinstance(explained, errors.UserError):
      explained.args = (message,)
      return explained
    return errors.InputError(message)

  # ----- evaluation -----
  @property
  def eval_step_function(self):
    """The tf.function evaluating one distributed batch (built on first use)."""
    if self._eval_step_fn is None:
      self._eval_step_fn = evaluation.make_eval_step(self.strategy, self.model,
                                                        self.task)
    return self._eval_step_fn

  def evaluate(self, steps: Optional[int] = None) -> Dict[str, float]:
    """Evaluates on eval_data; returns task.reduce_eval's metrics and writes them to
    TensorBoard under model_dir/eval.

    Args:
      steps: batches to evaluate (default trainer.validation_steps; 0: all).
    """
    if self.checkpoint is None:
      self.initialize()
    steps = self.experiment.trainer.validation_steps if steps is None else steps
    tf_input.check_inputs(self.experiment, self.task, "eval_data", self._log)
    return evaluation.evaluate(
        self.eval_step_function, self.inputs.distribute(self.experiment.eval_data), steps,
        self.task, self.experiment.eval_data, self.model_dir, int(self.step.numpy()),
        self.is_chief, self._log)

  def predictions_dir(self, step: int) -> str:
    """Where the evaluation at `step` writes the task's prediction files."""
    return evaluation.predictions_dir(self.model_dir, step)


def run_experiment(experiment: configs.ExperimentConfig, model_dir: str, mode: str = "train",
                   strategy: Optional[tf.distribute.Strategy] = None,
                   log_fn=None, replace_params: bool = False) -> Dict[str, float]:
  """Trains and/or evaluates `experiment` in model_dir with the TensorFlow trainer
  (bert_tf.training.runs.run_in_model_dir: params.yaml checked and saved, the latest
  checkpoint resumed).

  Args:
    mode: "train", "eval" (the latest checkpoint in model_dir) or "train_and_eval".
    replace_params: replace a params.yaml that disagrees with `experiment`.

  Returns:
    the final metrics (training report and/or evaluation metrics).
  """
  return runs.run_in_model_dir(
      experiment, model_dir, mode, replace_params,
      make_trainer=lambda: Trainer(experiment, model_dir, strategy=strategy, log_fn=log_fn),
      has_checkpoint=lambda _: tf.train.latest_checkpoint(model_dir) is not None)
