"""The TensorFlow engine: `strategy.run` inside `tf.function`, several steps per call.

Not `Model.fit`: with TF 2.21 and Keras 3.15 `fit` fails under
MultiWorkerMirroredStrategy (keras-team/keras#20585), while this loop runs the same
code under OneDevice, Mirrored, MultiWorkerMirrored and TPU strategies.

Its parts: the strategy (strategies), the input and its position (input), the step and
its loop of several steps per call (step), the distributed evaluation step
(evaluation), the dynamic float16 loss scale (loss_scale) and the workers' process
group (process_group). The restore of the
TensorFlow checkpoints older versions wrote (legacy_checkpoints) is the checkpoint
saver's (bert_tf.training.checkpointing), which finds it on this engine. The run around it is
bert_tf.training.trainer's.

Where the step is compiled once per shape (XLA, TPU), training batches cut to their
longest example are padded to the length buckets instead. Under MultiWorkerMirrored
strategy the workers are the run's process group (process_group): they agree on
stopping and on each checkpoint's step through collectives.
"""

from typing import Dict, List, Optional

import keras
import tensorflow as tf

from bert_tf import configs
from bert_tf import kernels
from bert_tf.training import engine as engine_lib
from bert_tf.training import steps
from bert_tf.training import trained_model
from bert_tf.training.tf_engine.optimizer import build_optimizer
from bert_tf.training.tf_engine import evaluation
from bert_tf.training.tf_engine import input as input_lib
from bert_tf.training.tf_engine import legacy_checkpoints as legacy_reader
from bert_tf.training.tf_engine import process_group
from bert_tf.training.tf_engine import step as step_lib
from bert_tf.training.tf_engine import strategies
from bert_tf.training.tf_engine.loss_scale import DynamicLossScale


class TensorFlowEngine(engine_lib.Engine):
  """Trains under a tf.distribute strategy.

  Args:
    strategy: defaults to the one experiment.runtime names.

  Attributes after `build`: model, optimizer, step_variable (tf.Variable int64),
  loss_scale (DynamicLossScale under mixed_float16, else None), inputs
  (input.TrainerInput; its training iterator: training_input()).
  """

  legacy_checkpoints = legacy_reader

  def __init__(self, experiment: configs.ExperimentConfig, task, log_fn,
               strategy: Optional[tf.distribute.Strategy] = None):
    super().__init__(experiment, task, log_fn)
    self.strategy = strategy or strategies.build_strategy(experiment.runtime)
    self._is_tpu = isinstance(self.strategy, tf.distribute.TPUStrategy)
    self._check_static_shapes()
    self.inputs = input_lib.TrainerInput(self.strategy, task, self.pads_to_length_buckets,
                                         log_fn)
    self._training_input = input_lib.TrainingIterator(self.inputs, experiment.train_data)
    self.processes = process_group.for_strategy(self.strategy)
    replicas = self.strategy.num_replicas_in_sync
    process_index, process_count = strategies.worker_placement(self.strategy)
    self._placement = engine_lib.Placement(
        num_replicas=replicas,
        description=f"{type(self.strategy).__name__} ({replicas} replicas)",
        process_index=process_index, process_count=process_count)
    # Made by build, or on first use.
    self.step_variable = self.loss_scale = self._train_step = None
    self._train_loop_fn = self._eval_step_fn = None

  # ----- where it runs -----
  @classmethod
  def start_runtime(cls, runtime: configs.RuntimeConfig) -> None:
    strategies.configure_runtime(runtime)

  @property
  def placement(self) -> engine_lib.Placement:
    return self._placement

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
    """Where the step is compiled once per shape: under XLA (jit_compile), on a TPU."""
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

  # ----- model, optimizer, step -----
  def build(self) -> None:
    experiment = self.experiment
    # The same seed gives the same initial weights under every strategy.
    keras.utils.set_random_seed(experiment.runtime.seed)
    with self.strategy.scope():
      self.model = trained_model.build(self.task)
      self.optimizer = build_optimizer(experiment.optimizer, experiment.trainer.train_steps,
                                       jit_compile=not self._is_tpu)
      self.optimizer.build(self.model.trainable_variables)
      self.step_variable = tf.Variable(
          0, dtype=tf.int64, trainable=False, name="step",
          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
      if experiment.runtime.mixed_precision_dtype == "mixed_float16":
        self.loss_scale = DynamicLossScale.from_string(experiment.runtime.loss_scale)
    self._train_step = step_lib.TrainStep(
        self.strategy, self.model, self.task, self.optimizer, self.step_variable,
        self.loss_scale, global_batch_size=experiment.train_data.global_batch_size,
        global_clipnorm=experiment.optimizer.global_clipnorm,
        accumulation_steps=experiment.trainer.gradient_accumulation_steps,
        jit_compile=self.jit_compile, next_batch=self.inputs.next_batch,
        input_spec_fn=lambda: self.inputs.element_spec(experiment.train_data))

  @property
  def step(self) -> int:
    return int(self.step_variable.numpy())

  @step.setter
  def step(self, step: int) -> None:
    self.step_variable.assign(step)

  def checkpoint_state(self) -> Dict[str, object]:
    return self.optimizer.state_variables(self.step_variable, self.loss_scale)

  def state_restored(self) -> None:
    step_lib.seed_each_replica(self.strategy, steps.seed_states(self.model))

  # ----- input -----
  def training_input(self) -> input_lib.TrainingIterator:
    return self._training_input

  # ----- steps -----
  @property
  def train_loop_function(self):
    """The tf.function running steps_per_loop steps (built on first use)."""
    if self._train_loop_fn is None:
      self._train_loop_fn = self._train_step.make_train_loop()
    return self._train_loop_fn

  def run_steps(self, num_steps: int) -> Dict[str, float]:
    totals = self.train_loop_function(self._training_input.iterator,
                                      tf.constant(num_steps, tf.int32))
    return {key: float(value) for key, value in totals.items()}

  @property
  def eval_step_function(self):
    """The tf.function evaluating one distributed batch (built on first use)."""
    if self._eval_step_fn is None:
      self._eval_step_fn = evaluation.make_eval_step(self.strategy, self.model, self.task)
    return self._eval_step_fn

  def evaluate_outputs(self, data_config: configs.DataConfig, steps: int
                       ) -> Dict[str, List]:
    return evaluation.gather_outputs(self.eval_step_function,
                                     self.inputs.distribute(data_config), steps)
