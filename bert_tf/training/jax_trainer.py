"""The training and evaluation loop on the JAX backend (KERAS_BACKEND=jax).

The same experiments, tasks, tf.data inputs, reports and checkpoints as the
TensorFlow trainer (bert_tf.training.trainer), with JAX doing the computation:
  - the step is bert_tf.training.jax_step's: `model.stateless_call`, the task's loss,
    `jax.value_and_grad`, gradient accumulation, and the update rule the TensorFlow
    trainer applies (bert_tf.training.stateless_optimizer: AdamW, LAMB or SGD with the
    project's schedule, weight-decay exclusions, global-norm clipping, non-finite steps
    skipped, the dynamic loss scale), jit-compiled;
  - data parallel over every device of every process (`keras.distribution.DataParallel`;
    across hosts after `jax.distributed` is initialized, bert_tf.training.backends):
    each process reads its 1/P share of the global batch from its own tf.data pipeline,
    and the loss denominators (task.loss_normalizers) are sums over the global batch;
  - checkpoints are portable (bert_tf.checkpoints.portable): the exporter, the
    TensorFlow trainer's task.init_checkpoint and this trainer's resume read them.
A killed run resumes at its last checkpoint with its weights, optimizer, step, random
state and input position; on CPU the resumed run is bit-identical to an uninterrupted
one (tests/training/test_jax_trainer.py).

Evaluation runs on every process over the whole eval input, on its local devices, and
the first process writes the summaries and predictions.
"""

import os
from typing import Dict, Optional

import jax
import jax.numpy as jnp
import keras
import numpy as np
import tensorflow as tf
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from bert_tf import configs
from bert_tf.checkpoints import portable
from bert_tf.tasks import base as task_base
from bert_tf.training import evaluation
from bert_tf.training import host_loop
from bert_tf.training import jax_step
from bert_tf.training import runs
from bert_tf.training import stateless_optimizer
from bert_tf.training import tf_input
from bert_tf.training.portable_saver import PortableSaver
from bert_tf.training.summaries import SummaryWriter
from bert_tf.utils.progress import StepLogger


def check_runtime(runtime: configs.RuntimeConfig) -> None:
  """Raises ConfigError for runtime settings that are TensorFlow's alone."""
  if runtime.distribution_strategy != "one_device":
    raise configs.ConfigError(
        f"runtime.distribution_strategy={runtime.distribution_strategy} is a tf.distribute "
        "strategy; on JAX the trainer is data parallel over every device of every "
        "process (keras.distribution.DataParallel): leave it one_device")
  if runtime.fused_kernels:
    raise configs.ConfigError("runtime.fused_kernels: the fused CPU kernels are "
                              "TensorFlow's; on JAX leave it unset")


def _host_batch(batch) -> Dict[str, np.ndarray]:
  """A tf.data batch as NumPy arrays JAX takes: 64-bit values as 32-bit (JAX computes
  in 32 bits), non-numeric features (strings) left out."""
  out = {}
  for key, value in batch.items():
    array = value.numpy() if hasattr(value, "numpy") else np.asarray(value)
    if array.dtype == np.int64:
      array = array.astype(np.int32)
    elif array.dtype == np.float64:
      array = array.astype(np.float32)
    elif array.dtype.kind not in "biuf":
      continue
    out[key] = array
  return out


class JaxTrainer:
  """Trains and evaluates one experiment's task on the JAX backend.

  Args:
    experiment: the resolved ExperimentConfig.
    model_dir: checkpoints, params.yaml and TensorBoard logs (train/, eval/).
    task: defaults to the task experiment.task names.
    log_fn: receives each console line.

  Attributes: model, optimizer, step (int), state (jax_step.TrainState once
  initialized; the model's variables hold it only after `sync_model`),
  restored_from, initialized_from, preempted.
  """

  def __init__(self, experiment: configs.ExperimentConfig, model_dir: str,
               task: Optional[task_base.Task] = None, log_fn=None):
    check_runtime(experiment.runtime)
    self.experiment = experiment
    self.model_dir = model_dir
    self._log = log_fn or print
    self.num_devices = jax.device_count()
    self.num_processes = jax.process_count()
    self.process_index = jax.process_index()
    self.is_chief = self.process_index == 0
    self.accumulation_steps = experiment.trainer.gradient_accumulation_steps
    self._check_batch_sizes()
    if self.num_devices > 1 and keras.distribution.distribution() is None:
      keras.distribution.set_distribution(
          keras.distribution.DataParallel(devices=jax.devices()))
    keras.utils.set_random_seed(experiment.runtime.seed)
    self.task = task or task_base.get_task(experiment)
    self.model = self.task.build_tuned_model()
    self.optimizer = stateless_optimizer.build_stateless_optimizer(
        experiment.optimizer, experiment.trainer.train_steps,
        self.model.trainable_variables, experiment.runtime.mixed_precision_dtype,
        experiment.runtime.loss_scale)
    barrier = multihost_utils.sync_global_devices if self.num_processes > 1 else None
    self.saver = PortableSaver(model_dir, experiment.trainer.max_to_keep,
                               self.process_index, barrier)
    self.step = 0
    self.state = None
    self.restored_from = None
    self.initialized_from: Dict[str, str] = {}
    self.preempted = False
    self.restore_input_iterator = True
    self._train_step = None
    self._eval_step = None
    self._iterator = None
    self._stop_signal = None

  def _check_batch_sizes(self) -> None:
    batch = self.experiment.train_data.global_batch_size
    shards = self.num_devices * self.accumulation_steps
    if batch % shards:
      raise configs.ConfigError(
          f"train_data.global_batch_size ({batch}) must be divisible by the number of "
          f"devices ({self.num_devices}) times trainer.gradient_accumulation_steps "
          f"({self.accumulation_steps})")

  def _random_state(self):
    return [v for v in self.model.variables if v.name == portable.SEED_STATE_NAME]

  # ----- setup -----
  def initialize(self) -> None:
    """Resumes from model_dir's newest readable checkpoint, or warm-starts from
    task.init_checkpoint when it holds none."""
    if self.state is not None:
      return
    latest = self.saver.latest()
    if latest:
      portable.restore_items(latest, self.model.trained_items, tuple(self.model.trained_items))
      self.step = portable.restore_trainer_state(latest, self.optimizer.state_variables(),
                                                 self._random_state())
      self.restored_from = latest
      self._log(f"Resumed from {latest} at step {self.step}")
    else:
      self.initialized_from = self.task.initialize(self.model)
      for item, path in self.initialized_from.items():
        self._log(f"Initialized {item} from {path}")
    self.state = jax_step.state_from(self.model, self.optimizer)

  def sync_model(self) -> None:
    """Writes the trained state into the model's and optimizer's variables (before
    reading them: saving, calling the model eagerly)."""
    if self.state is not None:
      jax_step.write_back(self.state, self.model, self.optimizer)

  def _input_context(self) -> tf.distribute.InputContext:
    return tf.distribute.InputContext(num_input_pipelines=self.num_processes,
                                      input_pipeline_id=self.process_index,
                                      num_replicas_in_sync=self.num_processes)

  def _train_iterator(self):
    if self._iterator is not None:
      return self._iterator
    dataset = self.task.build_inputs(self.experiment.train_data, self._input_context())
    iterator = iter(dataset)
    if self.step and not (self.restored_from and self.restore_input_iterator and
                          self.saver.restore_iterator(self.restored_from, iterator)):
      iterator = iter(dataset.skip(self.step))
      self._log(f"No input iterator restored: skipped the {self.step} consumed batches")
    self._iterator = iterator
    return iterator

  def _loss_fn(self, batch, outputs, normalizers):
    """The task's losses and metric sums of one micro-batch, flat."""
    values = dict(self.task.compute_loss(
        batch, outputs, self.experiment.train_data.global_batch_size, **normalizers))
    for name, (numerator, denominator) in self.task.train_metrics(batch, outputs).items():
      values[f"{name}/numerator"] = numerator
      values[f"{name}/denominator"] = denominator
    return values

  def _step_fn(self):
    if self._train_step is None:
      self._train_step = jax_step.make_train_step(
          self.model, self.optimizer, self._loss_fn,
          normalizers_fn=self.task.loss_normalizers, inputs_fn=self.task.model_inputs,
          accumulation_steps=self.accumulation_steps)
    return self._train_step

  # ----- training -----
  def train(self, train_steps: Optional[int] = None, evaluate_every: bool = False
            ) -> Dict[str, float]:
    """Trains to `train_steps` (default trainer.train_steps) global steps, with the
    TensorFlow trainer's checkpoint, summary, log and validation intervals; SIGTERM
    saves a checkpoint at the end of the current loop and returns (self.preempted).

    Returns:
      the last report: averaged losses, metrics, learning_rate, gradient_norm,
      sequences_per_second, plus eval/<metric> when evaluating.

    Raises:
      NonFiniteLossError: the loss became NaN or Inf (no checkpoint is written after).
    """
    config = self.experiment.trainer
    total = config.train_steps if train_steps is None else train_steps
    self.initialize()
    tf_input.check_inputs(self.experiment, self.task, "train_data", self._log)
    iterator = self._train_iterator()
    step_fn = self._step_fn()
    global_batch = self.experiment.train_data.global_batch_size
    writer = SummaryWriter(self.model_dir, "train", enabled=self.is_chief)
    progress = StepLogger(total, global_batch, start_step=self.step, log_fn=self._log)
    self._log(f"Training {self.task.name} from step {self.step} to {total} on JAX "
              f"({self.num_devices} device(s), {self.num_processes} process(es)), global "
              f"batch {global_batch}")

    def run_steps(num_steps):
      totals = None
      for _ in range(num_steps):
        batch = jax_step.shard_batch(_host_batch(next(iterator)))
        self.state, logs = step_fn(self.state, batch)
        totals = logs if totals is None else jax.tree_util.tree_map(jnp.add, totals, logs)
      totals = {key: float(value) for key, value in totals.items()}
      self.step += num_steps
      if totals["non_finite_loss_steps"] > 0:
        raise host_loop.NonFiniteLossError(
            f"The training loss became NaN or Inf within steps {self.step - num_steps + 1}"
            f"..{self.step}; stopping. No checkpoint was written after them; the latest "
            f"good checkpoint is {self.saver.latest()}")
      return totals, self.step

    def stop(step):
      path = portable.path_for_step(self.model_dir, step)
      if not os.path.exists(path):
        path = self.save()
      return (f"Received SIGTERM: saved checkpoint {path} at step {step}; stopping. "
              "Rerun the same command to resume.")

    hooks = host_loop.LoopHooks(run_steps=run_steps, save=self.save, evaluate=self.evaluate,
                                stop_requested=self._stop_requested, stop=stop)
    self._stop_signal = None
    try:
      with host_loop.sigterm_recorded(lambda signum: setattr(self, "_stop_signal", signum)):
        last_report, self.preempted = host_loop.train_loops(
            config, self.step, total, global_batch, evaluate_every, hooks, writer, progress,
            self.task.progress_metrics, self._log)
    finally:
      writer.close()
    self.sync_model()
    return last_report

  def _stop_requested(self) -> bool:
    """Whether any process received SIGTERM (all processes ask at the same steps)."""
    local = np.asarray([self._stop_signal is not None], np.int32)
    if self.num_processes == 1:
      return bool(local[0])
    return bool(np.any(multihost_utils.process_allgather(local)))

  def save(self) -> str:
    """Writes the checkpoint of the current step; returns its path."""
    self.sync_model()
    return self.saver.save(self.step, self.model.trained_items,
                           self.optimizer.state_variables(),
                           self._random_state(), iterator=self._iterator,
                           backend=keras.backend.backend())

  # ----- evaluation -----
  def _local_state(self, mesh: Mesh):
    """The state's model values, replicated over this process's devices."""
    replicated = NamedSharding(mesh, PartitionSpec())

    def local(x):
      if not x.is_fully_addressable:
        x = x.addressable_shards[0].data
      return jax.device_put(x, replicated)

    return jax_step.TrainState(tuple(map(local, self.state.trainable)),
                               tuple(map(local, self.state.non_trainable)), ())

  def evaluate(self, steps: Optional[int] = None) -> Dict[str, float]:
    """Evaluates on eval_data; returns task.reduce_eval's metrics and writes them to
    TensorBoard under model_dir/eval (and the task's predictions).

    Args:
      steps: batches to evaluate (default trainer.validation_steps; 0: all).
    """
    self.initialize()
    steps = self.experiment.trainer.validation_steps if steps is None else steps
    tf_input.check_inputs(self.experiment, self.task, "eval_data", self._log)
    devices = jax.local_devices()
    mesh = Mesh(np.array(devices), ("batch",))
    state = self._local_state(mesh)
    if self._eval_step is None:  # one compilation per batch shape for the whole run
      self._eval_step = jax_step.make_eval_step(self.model, self.task.eval_outputs,
                                                self.task.model_inputs)
    eval_step = self._eval_step
    sharding = NamedSharding(mesh, PartitionSpec("batch"))
    gathered: Dict[str, list] = {}
    dataset = self.task.build_inputs(self.experiment.eval_data)
    for i, batch in enumerate(dataset):
      if steps and i >= steps:
        break
      batch = _host_batch(batch)
      rows = len(next(iter(batch.values())))
      # Every device takes the same number of rows: the last batch is padded.
      padded = -rows % len(devices)
      batch = {k: jax.device_put(np.concatenate([v, np.repeat(v[:1], padded, axis=0)])
                                 if padded else v, sharding) for k, v in batch.items()}
      for key, value in eval_step(state, batch).items():
        gathered.setdefault(key, []).append(np.asarray(value)[:rows])
    return evaluation.report(self.task, gathered, self.model_dir, self.step,
                             self.is_chief, self._log)


def run_experiment(experiment: configs.ExperimentConfig, model_dir: str, mode: str = "train",
                   log_fn=None, replace_params: bool = False) -> Dict[str, float]:
  """bert_tf.training.trainer.run_experiment on the JAX backend: restores model_dir's
  checkpoint, saves params.yaml there (first process) and runs `mode`."""
  return runs.run_in_model_dir(
      experiment, model_dir, mode, replace_params,
      make_trainer=lambda: JaxTrainer(experiment, model_dir, log_fn=log_fn),
      has_checkpoint=lambda trainer: trainer.saver.latest() is not None)
