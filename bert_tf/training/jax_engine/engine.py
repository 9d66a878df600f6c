"""The JAX engine (KERAS_BACKEND=jax): jit-compiled steps on one device, or data
parallel over the local devices or every process's (jax.distributed).

  - the step is bert_tf.training.jax_engine.step's: `model.stateless_call`, the task's
    loss, `jax.value_and_grad` and the optimizer's stateless update, jit-compiled, its
    state donated;
  - runtime.distribution_strategy keeps its meaning (bert_tf.training.jax_engine.devices):
    one_device, mirrored (every local device), multi_worker_mirrored (every device of
    every process); each process reads its 1/P share of the global batch, and the loss
    denominators (task.loss_normalizers) are sums over the global batch;
  - the input (bert_tf.training.jax_engine.input) is padded to fixed lengths (the
    length buckets), so that the step compiles once per bucket.

Evaluation runs on every process over the whole eval input, on its local devices, and
the first process writes the summaries and predictions.
"""

from typing import Dict, List

import jax
import jax.numpy as jnp
import keras
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from bert_tf import configs
from bert_tf.training import engine as engine_lib
from bert_tf.training import steps
from bert_tf.training import trained_model
from bert_tf.training.jax_engine import optimizer as stateless_optimizer
from bert_tf.training.jax_engine import devices as devices_lib
from bert_tf.training.jax_engine import input as input_lib
from bert_tf.training.jax_engine import process_group
from bert_tf.training.jax_engine import step as step_lib


class JaxEngine(engine_lib.Engine):
  """Trains on the JAX backend.

  Attributes: devices (the data-parallel devices), model, optimizer, state
  (step.TrainState once the run starts; the model's variables hold it only after
  `checkpoint_state`), step_traces (how often the training step was traced, i.e.
  compiled: once per batch shape).
  """

  def __init__(self, experiment: configs.ExperimentConfig, task, log_fn, devices=None):
    """`devices`: the data-parallel devices, by default runtime.distribution_strategy's
    (devices.data_parallel_devices); a target's, unattached, for the ahead-of-time
    compile (bert_tf.training.jax_engine.compile_for)."""
    super().__init__(experiment, task, log_fn)
    devices_lib.check_runtime(experiment.runtime)
    self.devices = devices or devices_lib.data_parallel_devices(experiment.runtime)
    devices_lib.set_distribution(self.devices)
    self.state = None
    self.step_traces = 0
    self._step = 0
    self._train_step = None
    self._eval_step = None
    kinds = "/".join(sorted({d.platform for d in self.devices}))
    self._placement = engine_lib.Placement(
        num_replicas=len(self.devices),
        description=(f"JAX ({len(self.devices)} {kinds} device(s), {jax.process_count()} "
                     "process(es))"),
        process_index=jax.process_index(), process_count=jax.process_count())
    self.processes = process_group.JaxProcessGroup(self._placement.process_count)
    self._input = input_lib.HostInput(task, experiment.train_data,
                                      self._placement.process_index,
                                      self._placement.process_count, log_fn)

  # ----- where it runs -----
  @classmethod
  def start_runtime(cls, runtime: configs.RuntimeConfig) -> None:
    devices_lib.check_runtime(runtime)
    devices_lib.start(runtime)
    devices_lib.keep_tensorflow_off_accelerators()

  @property
  def placement(self) -> engine_lib.Placement:
    return self._placement

  # ----- model, optimizer, step -----
  def build(self) -> None:
    experiment = self.experiment
    keras.utils.set_random_seed(experiment.runtime.seed)
    self.model = trained_model.build(self.task)
    self.optimizer = stateless_optimizer.build_stateless_optimizer(
        experiment.optimizer, experiment.trainer.train_steps,
        self.model.trainable_variables, experiment.runtime.mixed_precision_dtype,
        experiment.runtime.loss_scale)

  @property
  def step(self) -> int:
    return self._step

  @step.setter
  def step(self, step: int) -> None:
    self._step = int(step)

  def checkpoint_state(self) -> Dict[str, object]:
    if self.state is not None:
      step_lib.write_back(self.state, self.model, self.optimizer)
    return self.optimizer.state_variables()

  def state_restored(self) -> None:
    self.state = step_lib.state_from(self.model, self.optimizer)

  # ----- input -----
  def training_input(self) -> input_lib.HostInput:
    return self._input

  # ----- steps -----
  def _loss_fn(self, batch, outputs, normalizers):
    """The task's losses and metric sums of one micro-batch, flat. Runs in Python once
    per trace of the step."""
    self.step_traces += 1
    losses = self.task.compute_loss(
        batch, outputs, self.experiment.train_data.global_batch_size, **normalizers)
    return steps.flat_outputs(losses, self.task.train_metrics(batch, outputs))

  def train_step(self):
    """The jit-compiled training step of this run (step.make_train_step): what
    run_steps calls, and what bert_tf.training.jax_engine.compile_for compiles ahead of
    time."""
    if self._train_step is None:
      self._train_step = step_lib.make_train_step(
          self.model, self.optimizer, self._loss_fn,
          normalizers_fn=self.task.loss_normalizers, inputs_fn=self.task.model_inputs,
          accumulation_steps=self.experiment.trainer.gradient_accumulation_steps)
    return self._train_step

  def run_steps(self, num_steps: int) -> Dict[str, float]:
    step_fn = self.train_step()
    totals = None
    for _ in range(num_steps):
      batch = step_lib.shard_batch(self._input.next_batch())
      self.state, logs = step_fn(self.state, batch)
      totals = logs if totals is None else jax.tree_util.tree_map(jnp.add, totals, logs)
      self._step += 1
    return {key: float(value) for key, value in totals.items()}

  # ----- evaluation -----
  def _local_state(self, mesh: Mesh):
    """The state's model values, replicated over this process's devices."""
    replicated = NamedSharding(mesh, PartitionSpec())

    def local(x):
      if not x.is_fully_addressable:
        x = x.addressable_shards[0].data
      return jax.device_put(x, replicated)

    return step_lib.TrainState(tuple(map(local, self.state.trainable)),
                               tuple(map(local, self.state.non_trainable)), ())

  def evaluate_outputs(self, data_config: configs.DataConfig, steps: int
                       ) -> Dict[str, List]:
    local_devices = [d for d in self.devices if d.process_index == self._placement.process_index]
    mesh = Mesh(np.array(local_devices), ("batch",))
    if self.state is None:
      self.state_restored()
    state = self._local_state(mesh)
    if self._eval_step is None:  # one compilation per batch shape for the whole run
      self._eval_step = step_lib.make_eval_step(self.model, self.task.eval_outputs,
                                                self.task.model_inputs)
    sharding = NamedSharding(mesh, PartitionSpec("batch"))
    gathered: Dict[str, list] = {}
    for i, batch in enumerate(input_lib.evaluation_batches(self.task, data_config)):
      if steps and i >= steps:
        break
      rows = len(next(iter(batch.values())))
      # Every device takes the same number of rows: the last batch is padded.
      padded = -rows % len(local_devices)
      batch = {k: jax.device_put(np.concatenate([v, np.repeat(v[:1], padded, axis=0)])
                                 if padded else v, sharding) for k, v in batch.items()}
      for key, value in self._eval_step(state, batch).items():
        gathered.setdefault(key, []).append(np.asarray(value)[:rows])
    return gathered
