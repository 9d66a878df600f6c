"""The training and evaluation loop: `strategy.run` inside `tf.function`, several steps
per call.

Not `Model.fit`: with TF 2.21 and Keras 3.15 `fit` fails under
MultiWorkerMirroredStrategy (keras-team/keras#20585), while this loop runs the same
code under OneDevice, Mirrored, MultiWorkerMirrored and TPU strategies.

One training step, per replica:
  1. sums the task's loss normalizers (the masked-LM weight sum) over the replica's
     batch and all-reduces them, so that every micro-batch of every replica divides by
     the global denominator;
  2. splits the batch into trainer.gradient_accumulation_steps micro-batches and sums
     their gradients (losses are averaged over the global batch, so the sum over
     micro-batches and replicas is the gradient of the global batch's loss);
  3. all-reduces gradients, losses and metric sums in one collective;
  4. unscales (mixed_float16), checks finiteness, clips to the global norm and applies
     the update and counts the step (one compiled launch), or keeps every variable as
     it was when the loss or the gradients are not finite;
  5. adds its outputs to the loop's running totals, a variable on the replica.
Per step the host only reads the input and launches the step; it reads the totals once
per loop. It raises NonFiniteLossError after a loop whose loss was not finite, before
any checkpoint is written, so the last checkpoint on disk holds the last good weights;
under mixed_float16 a non-finite loss is a float16 overflow that skips the step and
halves the loss scale, and stops training only at the smallest scale.

Each replica draws its own dropout masks (`_seed_each_replica`). Where the step is
compiled once per shape (XLA, TPU), batches cut to their longest example are padded to
the length buckets instead.

What a checkpoint holds, so that a resumed run continues the uninterrupted one: the
model's items, the optimizer, the step, the random state (the state of every Keras
SeedGenerator, which the dropout masks draw from) and, under OneDevice and Mirrored
strategies, the training input iterator (shuffle buffers, file positions, the dynamic
masking's random stream) of the worker's one input pipeline. Restoring the iterator
reads no consumed data. Where tf.distribute offers no checkpointable iterator
(MultiWorkerMirrored, TPU) and for checkpoints without one, the input position is
found by skipping the consumed batches.

SIGTERM (a preemption notice) makes `train` save a checkpoint at the end of the
current loop of at most trainer.steps_per_loop steps and return; a rerun resumes there.
Under MultiWorkerMirroredStrategy the workers first agree (an all-reduce of their stop
flags at every loop boundary), so that all save the same step and stop together.
"""

import logging
import os
import signal
from typing import Dict, List, Optional

import keras
import numpy as np
import tensorflow as tf

from bert_tf import configs
from bert_tf import constants
from bert_tf import kernels
from bert_tf.checkpoints import trackables
from bert_tf.data import batching
from bert_tf.data import tfrecords
from bert_tf.tasks import base as task_base
from bert_tf.training import checkpoints
from bert_tf.training import experiments
from bert_tf.training import host_loop
from bert_tf.training import strategies
from bert_tf.training.loss_scale import DynamicLossScale
from bert_tf.training.optimizers import build_optimizer
from bert_tf.utils import errors
from bert_tf.utils import files
from bert_tf.utils.progress import StepLogger
from bert_tf.training.summaries import SummaryWriter

PARAMS_FILE = "params.yaml"
PREDICTIONS_DIR = "predictions"
# Keras names the state variable of every SeedGenerator so.
_SEED_STATE_NAME = "seed_generator_state"
# params.yaml entries that fix the shapes of the checkpointed variables or of the data
# the input position counts: a resumed run must not change them.
_SHAPE_KEYS = ("model.", "task.", "train_data.seq_length",
               "train_data.max_predictions_per_seq", "train_data.global_batch_size")
_FREE_TASK_KEYS = ("task.init_checkpoint",)


class NonFiniteLossError(errors.UserError, FloatingPointError):
  """The training loss became NaN or Inf (a setting to change, such as the learning rate,
  so the tools report it in one line)."""


class ParamsMismatchError(configs.ConfigError):
  """The model_dir's params.yaml fixes shapes that the new configuration changes."""


def _split_micro_batches(tensor: tf.Tensor, num: int) -> tf.Tensor:
  """[B, ...] -> [num, B // num, ...], keeping static dimensions where known."""
  shape = tensor.shape.as_list()
  if shape[0] is not None:
    if shape[0] % num:
      raise ValueError(f"The per-replica batch ({shape[0]}) is not divisible by "
                       f"trainer.gradient_accumulation_steps ({num})")
    return tf.reshape(tensor, [num, shape[0] // num] + shape[1:])
  dynamic = tf.shape(tensor)
  return tf.reshape(tensor, tf.concat([[num, dynamic[0] // num], dynamic[1:]], axis=0))


class Trainer:
  """Trains and evaluates one experiment's task under a tf.distribute strategy.

  Args:
    experiment: the resolved ExperimentConfig.
    model_dir: checkpoints, params.yaml and TensorBoard logs (train/, eval/).
    strategy: defaults to the one experiment.runtime names.
    task: defaults to the task experiment.task names.
    log_fn: receives each console line (default: absl/std logging at INFO).

  Attributes after construction: model, optimizer, step (tf.Variable int64),
  checkpoint (tf.train.Checkpoint), restored_from (the resumed checkpoint or None),
  initialized_from ({item: path} of a warm start from task.init_checkpoint),
  preempted (True once `train` stopped early on SIGTERM).
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

    self._train_iterator = None
    self._train_loop_fn = None
    self._eval_step_fn = None
    self._output_names = None
    self.restored_from = None
    self.initialized_from: Dict[str, str] = {}
    self.checkpoint = None
    self._saver = None
    self._checkpoint_items: Dict[str, object] = {}
    self.preempted = False
    self._stop_signal = None
    self._stop_agreement_fn = None
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
  def iterator_checkpointable(self) -> bool:
    """Whether the training input iterator is saved in checkpoints.

    tf.distribute's iterators are no trackable objects in TF 2.21, but plain tf.data
    iterators are: under OneDeviceStrategy and MirroredStrategy the worker's one input
    pipeline is a plain tf.data iterator whose elements the loop hands to the replicas
    itself (`_next_batch`).
    """
    return isinstance(self.strategy, (tf.distribute.OneDeviceStrategy,
                                      tf.distribute.MirroredStrategy))

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

  def build_inputs(self, data_config: configs.DataConfig,
                   input_context: tf.distribute.InputContext) -> tf.data.Dataset:
    """The batches the trainer reads: the task's per-replica batches; with
    `pads_to_length_buckets` (training, or any input on a TPU), those cut to their
    longest example padded to the next of data_config.length_buckets and seq_length."""
    dataset = self.task.build_inputs(data_config, input_context)
    if not (self._is_tpu or (self.pads_to_length_buckets and data_config.is_training)):
      return dataset
    spec = dataset.element_spec.get(constants.INPUT_WORD_IDS)
    if spec is None or spec.shape[-1] is not None:
      return dataset
    bounds = [*data_config.active_length_buckets(), data_config.seq_length]
    return dataset.map(lambda batch: batching.pad_to_length_bucket(batch, bounds))

  def _distribute(self, data_config: configs.DataConfig, skip_steps: int = 0):
    """The tf.distribute dataset: one input pipeline per worker, prefetching to the
    devices (the replicas' batches on a TPU).

    Args:
      skip_steps: global steps whose batches are skipped (resuming without a
        checkpointed iterator: with a deterministic input, fixed files, shuffle seed and
        order, this is the very position an uninterrupted run would be at).
    """
    def dataset_fn(input_context):
      dataset = self.build_inputs(data_config, input_context)
      if skip_steps:
        per_pipeline = (input_context.num_replicas_in_sync //
                        input_context.num_input_pipelines)
        dataset = dataset.skip(skip_steps * per_pipeline)
      return dataset

    options = None
    if self._is_tpu:
      options = tf.distribute.InputOptions(experimental_fetch_to_device=True)
    return self.strategy.distribute_datasets_from_function(dataset_fn, options)

  def _worker_input(self, data_config: configs.DataConfig, skip_steps: int = 0):
    """The worker's one training input pipeline as a plain (checkpointable) tf.data
    iterator of per-replica batches, one element per replica and step, under
    OneDeviceStrategy and MirroredStrategy: one shuffle buffer and one iterator state
    for all the worker's replicas."""
    replicas = self.strategy.num_replicas_in_sync
    context = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                         num_replicas_in_sync=replicas)
    dataset = self.build_inputs(data_config, context)
    if skip_steps:
      dataset = dataset.skip(skip_steps * replicas)
    return iter(dataset)

  def _next_batch(self, iterator):
    """The next step's batch (in the training loop): from the worker's tf.data iterator
    (`_worker_input`), the next element for each replica, copied to the replica's
    device as soon as it is read; from a tf.distribute iterator, its next batch."""
    if not isinstance(iterator, tf.data.Iterator):
      return next(iterator)
    devices = self.strategy.extended.worker_devices
    batches = [next(iterator) for _ in devices]

    def on_device(context):
      replica = context.replica_id_in_sync_group
      with tf.device(devices[replica]):
        return tf.nest.map_structure(tf.identity, batches[replica])

    return self.strategy.experimental_distribute_values_from_function(on_device)

  def _ensure_train_iterator(self):
    if self._train_iterator is not None:
      return self._train_iterator
    data_config = self.experiment.train_data
    step = int(self.step.numpy())
    saved = None
    if self.restored_from is not None and self.restore_input_iterator:
      saved = _saved_iterator_count(self.restored_from)
    if not self.iterator_checkpointable:
      self._train_iterator = iter(self._distribute(data_config, skip_steps=step))
      if step:
        self._log(f"{type(self.strategy).__name__} has no checkpointable input "
                  f"iterator: skipped the {step} consumed batches")
      return self._train_iterator
    iterator = self._worker_input(data_config)
    if saved and saved != 1:
      self._log(f"{self.restored_from} holds {saved} input iterators (one per replica, "
                f"as written by an older version), this run has one")
      saved = None
    if saved:
      try:
        status = tf.train.Checkpoint(iterator=[iterator]).read(self.restored_from)
        status.assert_existing_objects_matched()
        status.expect_partial()
      except (AssertionError, ValueError, tf.errors.OpError) as e:
        # E.g. the state of a pipeline of another structure.
        self._log(f"Cannot restore the input iterator from {self.restored_from} "
                  f"({type(e).__name__}: {str(e).splitlines()[0]})")
        saved = None
    if not saved and step:
      iterator = self._worker_input(data_config, step)
      self._log(f"No input iterator restored from {self.restored_from}: skipped the "
                f"{step} consumed batches")
    self._checkpoint_items["iterator"] = [iterator]
    self._build_checkpoint_object()
    self._train_iterator = iterator
    return self._train_iterator

  def _random_state(self) -> List:
    """The state variables of the model's Keras SeedGenerators (dropout), in the
    model's variable order."""
    return [v for v in self.model.variables if v.name == _SEED_STATE_NAME]

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
    random_state = self._random_state()
    if random_state:
      items["random_state"] = random_state
    self._checkpoint_items = items
    self._build_checkpoint_object()
    self.restored_from = self._saver.restore_latest(items)
    if self.restored_from:
      self._saved = (int(self.step.numpy()), self.restored_from)
    if self.restored_from:
      self._log(f"Resumed from {self.restored_from} at step {int(self.step.numpy())}")
    else:
      self.initialized_from = self.task.initialize(self.model)
      for item, path in self.initialized_from.items():
        self._log(f"Initialized {item} from {path}")
    self._seed_each_replica()

  def _seed_each_replica(self) -> None:
    """Gives each replica dropout masks of its own.

    The state of a Keras SeedGenerator is a variable whose copies, one per replica, all
    start from the same value and advance alike: every replica would draw the same
    masks. Here the first replica keeps the state (the copy a checkpoint saves) and
    replica r > 0 takes a seed folded from it and r, with the same counter. Each copy
    then advances on its own; as the seed never changes, a resumed run derives what the
    uninterrupted one holds, and draws the same masks.
    """
    states = [getattr(state, "value", state) for state in self._random_state()]
    if not states or self.strategy.num_replicas_in_sync == 1:
      return

    def fold_in_replica():
      replica = tf.distribute.get_replica_context().replica_id_in_sync_group
      for state in states:
        seed, counter = tf.unstack(state.read_value())
        folded = tf.cast(tf.random.experimental.stateless_fold_in(
            tf.stack([seed, tf.zeros_like(seed)]), replica, alg="philox")[0], seed.dtype)
        own = tf.where(replica == 0, seed, folded)
        tf.raw_ops.AssignVariableOp(resource=state.handle, value=tf.stack([own, counter]))

    tf.function(lambda: self.strategy.run(fold_in_replica))()

  # ----- the step -----
  def _forward_backward(self, features, normalizers, loss_scale):
    """Gradients, losses and metric sums of one (micro-)batch on one replica."""
    variables = self.model.trainable_variables
    with tf.GradientTape() as tape:
      outputs = self.model(self.task.model_inputs(features), training=True)
      losses = self.task.compute_loss(features, outputs,
                                      self.experiment.train_data.global_batch_size,
                                      **normalizers)
      loss = tf.cast(losses["loss"], tf.float32)
      scaled = loss * loss_scale if loss_scale is not None else loss
    grads = tape.gradient(scaled, variables)
    grads = [tf.zeros_like(v, tf.float32) if g is None else
             tf.cast(tf.convert_to_tensor(g), tf.float32) for g, v in zip(grads, variables)]
    metrics = self.task.train_metrics(features, outputs)
    losses = {k: tf.cast(v, tf.float32) for k, v in losses.items()}
    return grads, losses, metrics

  @property
  def jit_compile(self) -> bool:
    """runtime.jit_compile, or where unset, whether the step runs on a GPU or TPU."""
    setting = self.experiment.runtime.jit_compile
    if setting is not None:
      return setting
    return self._is_tpu or bool(self.experiment.runtime.num_gpus) or (
        kernels.tensorflow_sees_accelerators())

  def _compiled_forward_backward(self):
    if self.jit_compile:
      return tf.function(self._forward_backward, jit_compile=True)
    return self._forward_backward

  def _replica_step(self, features, forward_backward):
    """One optimizer update on one replica; returns all-reduced float32 scalars."""
    context = tf.distribute.get_replica_context()
    normalizers = self.task.loss_normalizers(features)
    if normalizers:
      normalizers = context.all_reduce(tf.distribute.ReduceOp.SUM, normalizers)
    scale = self.loss_scale.scale.read_value() if self.loss_scale is not None else None
    variables = self.model.trainable_variables
    n = self.accumulation_steps
    if n == 1:
      grads, losses, metrics = forward_backward(features, normalizers, scale)
    else:
      micro = tf.nest.map_structure(lambda t: _split_micro_batches(t, n), features)

      def body(i, acc_grads, acc_losses, acc_metrics):
        batch = tf.nest.map_structure(lambda t: t[i], micro)
        g, l, m = forward_backward(batch, normalizers, scale)
        return (i + 1, [a + b for a, b in zip(acc_grads, g)],
                tf.nest.map_structure(tf.add, acc_losses, l),
                tf.nest.map_structure(tf.add, acc_metrics, m))

      zero_losses, zero_metrics = self._zero_outputs()
      _, grads, losses, metrics = tf.while_loop(
          lambda i, *_: i < n, body,
          (tf.constant(0), [tf.zeros_like(v, tf.float32) for v in variables],
           zero_losses, zero_metrics))

    reduced = context.all_reduce(tf.distribute.ReduceOp.SUM,
                                 {"grads": grads, "losses": losses, "metrics": metrics})
    grads, losses, metrics = reduced["grads"], reduced["losses"], reduced["metrics"]
    # Unscaling and clipping are one factor that the optimizer applies inside its fused
    # update, and a NaN or Inf anywhere in the gradients makes their norm non-finite:
    # no separate pass over the gradients for either.
    grad_norm = tf.linalg.global_norm(grads)
    gradient_scale = tf.constant(1.0)
    if scale is not None:
      gradient_scale = 1.0 / scale
      grad_norm = grad_norm / scale
    grads_finite = tf.math.is_finite(grad_norm)
    loss_finite = tf.math.is_finite(losses["loss"])
    clip = self.experiment.optimizer.global_clipnorm
    if clip > 0:
      gradient_scale *= clip / tf.maximum(grad_norm, clip)
    step_finite = grads_finite & loss_finite
    step = self.step.read_value()
    # The step counter advances in the optimizer's own launch: the update and the count
    # are never seen apart, not even when a read error ends the loop mid-way.
    self.optimizer.apply_gradients(grads, variables, step, should_apply=step_finite,
                                   gradient_scale=gradient_scale, step_counter=self.step)
    out = dict(losses)
    for name, (numerator, denominator) in metrics.items():
      out[f"{name}/numerator"] = numerator
      out[f"{name}/denominator"] = denominator
    out["gradient_norm"] = grad_norm
    out["learning_rate"] = tf.cast(self.optimizer.learning_rate(step), tf.float32)
    # Under a dynamic float16 loss scale a non-finite loss is an overflow like a
    # non-finite gradient: the step is skipped and the scale halved. Training stops on
    # it only where the scale cannot go lower (fixed, or at its minimum) or without one.
    stops = tf.logical_not(loss_finite)
    if self.loss_scale is not None:
      stops &= tf.logical_not(self.loss_scale.can_lower(scale))
    out["non_finite_loss_steps"] = tf.cast(stops, tf.float32)
    out["skipped_steps"] = 1.0 - tf.cast(step_finite, tf.float32)
    if self.loss_scale is not None:
      out["loss_scale"] = scale
      self.loss_scale.update(step_finite)
    return out

  def _zero_outputs(self):
    """Zeros shaped like the task's losses and metric sums (names found by tracing)."""
    losses, metrics = self._task_output_names()
    zero = tf.constant(0.0)
    return ({name: zero for name in losses},
            {name: (zero, zero) for name in metrics})

  def _task_output_names(self):
    """Names of the task's losses and train metrics, from one graph-only trace."""
    if self._output_names is None:
      data_config = self.experiment.train_data
      replicas = self.strategy.num_replicas_in_sync
      context = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                           num_replicas_in_sync=replicas)
      spec = self.task.build_inputs(data_config, context).element_spec

      def probe(features):
        outputs = self.model(self.task.model_inputs(features), training=False)
        normalizers = self.task.loss_normalizers(features)
        losses = self.task.compute_loss(features, outputs, data_config.global_batch_size,
                                        **normalizers)
        return losses, self.task.train_metrics(features, outputs)

      losses, metrics = tf.function(probe).get_concrete_function(spec).structured_outputs
      self._output_names = (sorted(losses), sorted(metrics))
    return self._output_names

  def _output_keys(self) -> List[str]:
    losses, metrics = self._task_output_names()
    keys = list(losses)
    for name in metrics:
      keys += [f"{name}/numerator", f"{name}/denominator"]
    keys += ["gradient_norm", "learning_rate", "non_finite_loss_steps", "skipped_steps"]
    if self.loss_scale is not None:
      keys.append("loss_scale")
    return keys

  def _make_train_loop(self):
    keys = self._output_keys()
    forward_backward = self._compiled_forward_backward()
    strategy = self.strategy
    with strategy.scope():
      # The sums of the loop's step outputs, one copy per replica, added to inside
      # strategy.run and read once per loop: per step the host only reads the input
      # and launches the step (on a TPU every host-side op is a round trip).
      totals = tf.Variable(tf.zeros([len(keys)]), trainable=False, name="loop_totals",
                           synchronization=tf.VariableSynchronization.ON_WRITE,
                           aggregation=tf.VariableAggregation.NONE)

    def replica_step(features):
      out = self._replica_step(features, forward_backward)
      # Every replica holds the same all-reduced values and adds them to its own copy.
      tf.raw_ops.AssignAddVariableOp(resource=totals.handle,
                                     value=tf.stack([out[key] for key in keys]))

    @tf.function
    def train_loop(iterator, num_steps):
      """Runs num_steps (int32 scalar) steps; returns the sums of their outputs."""
      totals.assign(tf.zeros_like(totals))
      for _ in tf.range(num_steps):
        strategy.run(replica_step, args=(self._next_batch(iterator),))
      values = tf.unstack(strategy.experimental_local_results(totals)[0].read_value())
      return dict(zip(keys, values))

    return train_loop

  @property
  def train_loop_function(self):
    """The tf.function running steps_per_loop steps (built on first use)."""
    if self._train_loop_fn is None:
      self._train_loop_fn = self._make_train_loop()
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
    self._check_inputs("train_data")
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
        raise NonFiniteLossError(
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

    hooks = host_loop.LoopHooks(run_steps=run_steps, save=self._save,
                                evaluate=self.evaluate,
                                stop_requested=self._stop_requested, stop=stop)
    self._stop_signal = None
    try:
      with host_loop.sigterm_recorded(lambda signum: setattr(self, "_stop_signal", signum)):
        last_report, self.preempted = host_loop.train_loops(
            config, step, total, global_batch, evaluate_every, hooks, writer, progress,
            self.task.progress_metrics, self._log)
    finally:
      writer.close()
    return last_report

  def _check_inputs(self, section: str) -> None:
    check_inputs(self.experiment, self.task, section, self._log)

  def _stop_requested(self) -> bool:
    """Whether training stops at this loop boundary: this process received SIGTERM
    or, under MultiWorkerMirroredStrategy, any worker did.

    Every worker calls it at the same boundaries, and a sum of the workers' stop flags
    (one scalar all-reduce per loop) gives each the same answer, so that all save the
    same step together and stop.
    """
    local = self._stop_signal is not None
    if not isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy):
      return local
    if self._stop_agreement_fn is None:
      strategy = self.strategy

      @tf.function
      def any_worker_stops(flag):
        def replica_fn(replica_flag):
          # The identity places the value on the replica's device, which the
          # collective needs to know.
          return tf.distribute.get_replica_context().all_reduce(
              tf.distribute.ReduceOp.SUM, tf.identity(replica_flag))
        per_replica = strategy.run(replica_fn, args=(flag,))
        return strategy.experimental_local_results(per_replica)[0]

      self._stop_agreement_fn = any_worker_stops
    return float(self._stop_agreement_fn(tf.constant(float(local)))) > 0

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
  def _make_eval_step(self):
    strategy = self.strategy

    def replica_eval(features):
      outputs = self.model(self.task.model_inputs(features), training=False)
      return self.task.eval_outputs(features, outputs)

    # Batches are padded to their longest example: without reduce_retracing every new
    # length would trace the step again.
    @tf.function(reduce_retracing=True)
    def eval_step(features):
      per_replica = strategy.run(replica_eval, args=(features,))
      # Gathered one tensor at a time: strategy.gather of the whole dict returns only
      # the first replica's values under MirroredStrategy in TF 2.21.
      return {key: strategy.gather(value, axis=0) for key, value in per_replica.items()}

    return eval_step

  @property
  def eval_step_function(self):
    """The tf.function evaluating one distributed batch (built on first use)."""
    if self._eval_step_fn is None:
      self._eval_step_fn = self._make_eval_step()
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
    self._check_inputs("eval_data")
    dataset = self._distribute(self.experiment.eval_data)
    gathered: Dict[str, list] = {}
    try:
      for i, features in enumerate(dataset):
        if steps and i >= steps:
          break
        values = self.eval_step_function(features)
        for key, value in values.items():
          gathered.setdefault(key, []).append(np.asarray(value))
    except tf.errors.DataLossError as e:
      raise self.task.explain_input_error(e, self.experiment.eval_data) from e
    if not gathered:
      raise errors.InputError("The evaluation input (eval_data) yielded no batch")
    values = {k: np.concatenate(v) for k, v in gathered.items()}
    metrics = self.task.reduce_eval(values)
    step = int(self.step.numpy())
    writer = SummaryWriter(self.model_dir, "eval", enabled=self.is_chief)
    writer.write(metrics, step)
    writer.close()
    shown = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items())
    self._log(f"Evaluation at step {step}: {shown}")
    if self.is_chief:
      written = self.task.write_predictions(values, self.predictions_dir(step))
      if written:
        self._log(f"Wrote predictions {written}")
    return metrics

  def predictions_dir(self, step: int) -> str:
    """Where the evaluation at `step` writes the task's prediction files."""
    return os.path.join(self.model_dir, PREDICTIONS_DIR, f"step_{step}")


def check_inputs(experiment: configs.ExperimentConfig, task: task_base.Task, section: str,
                 log_fn) -> None:
  """Checks the experiment's `section` (train_data or eval_data): every record's
  checksums first with validate_inputs, then task.check_inputs. Its user errors are
  prefixed with the section, as the data config does not know it."""
  data_config = getattr(experiment, section)
  try:
    if data_config.validate_inputs and data_config.format == task_base.TFRECORD:
      count = tfrecords.validate_record_files(data_config.input_path,
                                              data_config.compression_type)
      log_fn(f"{section}: every record of {count} file(s) read with valid checksums")
    task.check_inputs(data_config)
  except errors.UserError as e:
    e.args = (f"{section}: {e}",)
    raise


def _saved_iterator_count(prefix: str) -> int:
  """How many replicas' input iterators the checkpoint at `prefix` holds (0: none)."""
  keys = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
  return len({key.split("/")[1] for key in keys if key.startswith("iterator/")})


def _flat(data: dict, prefix: str = "") -> Dict[str, object]:
  flat = {}
  for key, value in data.items():
    if isinstance(value, dict):
      flat.update(_flat(value, f"{prefix}{key}."))
    else:
      flat[f"{prefix}{key}"] = value
  return flat


def check_params_match(experiment: configs.ExperimentConfig, model_dir: str,
                       replace: bool = False) -> List[str]:
  """Raises ParamsMismatchError when model_dir's params.yaml and `experiment` differ in
  an entry that fixes variable or data shapes (model.*, task.*, the training data's
  sequence length, predictions per sequence and global batch); other entries (steps,
  intervals, learning rate, paths) may change between runs of one model_dir.

  Returns:
    the differing entries (with `replace`, which raises nothing).
  """
  path = os.path.join(model_dir, PARAMS_FILE)
  if not tf.io.gfile.exists(path):
    return []
  # Parsed, not read raw: entries a newer version added come back with their defaults.
  old = _flat(experiments.experiment_from_yaml(path).as_dict())
  new = _flat(experiment.as_dict())
  differing = sorted(
      key for key in set(old) | set(new)
      if key.startswith(_SHAPE_KEYS) and key not in _FREE_TASK_KEYS
      and old.get(key) != new.get(key))
  if differing and not replace:
    shown = "; ".join(f"{key}: {old.get(key)!r} in {PARAMS_FILE}, now {new.get(key)!r}"
                      for key in differing)
    raise ParamsMismatchError(
        f"The configuration differs from {path} in entries that fix the model or data "
        f"shapes ({shown}). Use another model_dir, or pass replace_params (tools/train.py "
        f"--replace_params) to replace {PARAMS_FILE}.")
  return differing


def run_experiment(experiment: configs.ExperimentConfig, model_dir: str, mode: str = "train",
                   strategy: Optional[tf.distribute.Strategy] = None,
                   log_fn=None, replace_params: bool = False) -> Dict[str, float]:
  """Restores model_dir's checkpoint, saves params.yaml there (chief only) and runs `mode`.

  params.yaml is written only once the configuration is accepted and the restore
  succeeded; an existing one that fixes other shapes is an error (see
  `check_params_match`) unless replace_params.

  Args:
    mode: "train", "eval" (the latest checkpoint in model_dir) or "train_and_eval".
    replace_params: replace a params.yaml that disagrees with `experiment`.

  Returns:
    the final metrics (training report and/or evaluation metrics).
  """
  if mode not in ("train", "eval", "train_and_eval"):
    raise ValueError(f"mode must be train, eval or train_and_eval, got '{mode}'")
  differing = check_params_match(experiment, model_dir, replace=replace_params)
  trainer = Trainer(experiment, model_dir, strategy=strategy, log_fn=log_fn)
  # The checkpointed input iterator holds batches of the old data shapes.
  trainer.restore_input_iterator = not any(k.startswith("train_data.") for k in differing)
  if mode == "eval" and tf.train.latest_checkpoint(model_dir) is None:
    raise errors.MissingInputError(f"--mode=eval needs a checkpoint in {model_dir}")
  trainer.initialize()
  if trainer.is_chief:
    files.make_dirs(model_dir)
    experiment.save(os.path.join(model_dir, PARAMS_FILE))
  if mode == "eval":
    return trainer.evaluate()
  return trainer.train(evaluate_every=(mode == "train_and_eval"))
