"""What the one Trainer (bert_tf.training.trainer) asks of the backend that computes.

The Trainer owns a run: its loops, intervals, reports, summaries, checkpoints, the
response to SIGTERM, a non-finite loss or a corrupt input, and params.yaml. An engine
owns the computation: the model and optimizer on its devices, the training and
evaluation steps, the input placed on the devices, and the collectives between
processes. Two engines implement this interface:

  bert_tf.training.tf_engine.TensorFlowEngine   tf.distribute strategies (one device,
                                                Mirrored, MultiWorkerMirrored, TPU),
                                                tf.function steps, the TF CPU kernels;
  bert_tf.training.jax_engine.JaxEngine         one device or data parallel over the
                                                local devices or every process's
                                                (jax.distributed), jit steps; imports
                                                no TensorFlow.

Both build the same model (trained_model.build), apply the same optimizer maths
(bert_tf.training.update_rule) and hand the Trainer the same variables to checkpoint,
under the same names, so that a checkpoint written under one engine resumes under the
other.

The training step's totals, summed over the steps of one loop, hold the outputs that
bert_tf.training.steps names (the task's losses and metric sums, gradient_norm,
learning_rate, skipped_steps, non_finite_loss_steps, loss_scale); what else both
engines' steps share (the micro-batch order, the seed state) is there too.
"""

import abc
import dataclasses
from typing import Dict, List

from bert_tf import configs
from bert_tf.tasks import base as task_base
from bert_tf.training import input_source
from bert_tf.training import process_group


@dataclasses.dataclass(frozen=True)
class Placement:
  """Where an engine runs.

  Attributes:
    num_replicas: the data-parallel replicas (devices) that share each global batch.
    description: how it runs, for the first training line ("MirroredStrategy (2
      replicas)").
    process_index: this process's number among the processes that take part in a
      checkpoint (each but the chief marks its part complete): 0 for the chief, which
      writes it.
    process_count: the processes that take part in a checkpoint.
  """
  num_replicas: int
  description: str
  process_index: int = 0
  process_count: int = 1

  @property
  def is_chief(self) -> bool:
    """Whether this process writes checkpoints, summaries and predictions: process 0."""
    return self.process_index == 0


class Engine(abc.ABC):
  """The computation of one training run on one backend.

  Its members: where it runs (start_runtime before the engine is made, then placement),
  the computation (build, run_steps, evaluate_outputs), the state a checkpoint holds
  (step; checkpoint_state, the optimizer's variables once the model's and optimizer's
  variables hold the trained values; state_restored once they hold their initial or
  restored values), the processes of the run (processes: how they agree, how a lost one
  is told; bert_tf.training.process_group), the training input that run_steps reads
  (training_input: how its batches are made and placed on the devices; its position,
  resume and corrupt-record error are the Trainer's input source's,
  bert_tf.training.input_source), and legacy_checkpoints, the
  reader of the TensorFlow checkpoints older versions wrote where the engine can read
  them. The dropout random state a checkpoint holds is the model's (steps.seed_states).

  Args:
    experiment: the resolved ExperimentConfig.
    task: the task (its model, inputs, losses and metrics).
    log_fn: receives each console line.

  Attributes: processes (the run's process_group.ProcessGroup; this process alone
  unless the engine sets its own); set by `build`: model (the task's Keras model) and
  optimizer.
  """

  # A module with newest_readable(model_dir) and restore_trainer(engine, prefix)
  # (bert_tf.training.tf_engine.legacy_checkpoints), or None where the engine cannot
  # read the TensorFlow checkpoints (`ckpt-N.index`) older versions wrote.
  legacy_checkpoints = None

  def __init__(self, experiment: configs.ExperimentConfig, task: task_base.Task, log_fn):
    self.experiment = experiment
    self.task = task
    self._log = log_fn
    self.model = self.optimizer = None
    self.processes = process_group.ProcessGroup()

  # ----- where it runs -----
  @classmethod
  def start_runtime(cls, runtime: configs.RuntimeConfig) -> None:
    """Sets up the engine's devices for `runtime`, before the run's first computation
    (bert_tf.training.backends.start_runtime)."""

  @property
  @abc.abstractmethod
  def placement(self) -> Placement:
    """Its replicas, this process among the others, and how it runs."""

  # ----- the computation -----
  @abc.abstractmethod
  def build(self) -> None:
    """Builds model and optimizer (seeded with runtime.seed) on the engine's devices."""

  @abc.abstractmethod
  def run_steps(self, num_steps: int) -> Dict[str, float]:
    """Runs num_steps training steps; returns the sums of their outputs (the keys
    bert_tf.training.steps names).

    Raises:
      the input's read error when it met a corrupt record (see
      input_source.EngineInput.corrupt_record_error).
    """

  @abc.abstractmethod
  def evaluate_outputs(self, data_config: configs.DataConfig, steps: int
                       ) -> Dict[str, List]:
    """The task's eval outputs of the first `steps` batches of `data_config` (0: all),
    as {output: [one NumPy array per batch, over the whole global batch]}."""

  # ----- the state a checkpoint holds -----
  @property
  @abc.abstractmethod
  def step(self) -> int:
    """Optimizer updates so far (the global step); set after a restore."""

  @step.setter
  @abc.abstractmethod
  def step(self, step: int) -> None:
    pass

  @abc.abstractmethod
  def checkpoint_state(self) -> Dict[str, object]:
    """Makes the model's and optimizer's variables hold the trained values (for saving,
    for calling the model eagerly) and returns the optimizer's state {name: variable}
    under the names both engines use (bert_tf.training.update_rule), which a checkpoint
    writes and restores into."""

  def state_restored(self) -> None:
    """Called once the variables hold their initial or restored values."""

  # ----- input -----
  @abc.abstractmethod
  def training_input(self) -> input_source.EngineInput:
    """The training input that run_steps reads (the same object on every call); the
    Trainer's InputSource positions it and saves its position."""
