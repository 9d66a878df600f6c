"""The TensorFlow trainer's training step and its loop of several steps per call.

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
per loop.

Each replica draws its own dropout masks (`seed_each_replica`).
"""

from typing import Callable, Dict, List, Optional

import keras
import tensorflow as tf

from bert_tf.tasks import base as task_base
from bert_tf.training import loss_scale_rule
from bert_tf.training import steps
from bert_tf.training import update_rule
from bert_tf.training.tf_engine.loss_scale import DynamicLossScale

def _reshape_leading(tensor: tf.Tensor, leading) -> tf.Tensor:
  """[B, ...] -> [*leading, ...], keeping static dimensions where known."""
  rest = tensor.shape[1:]
  if rest.is_fully_defined() and all(isinstance(d, int) for d in leading):
    return tf.reshape(tensor, list(leading) + rest.as_list())
  return tf.reshape(tensor, tf.concat([tf.stack(leading), tf.shape(tensor)[1:]], axis=0))


def split_micro_batches(tensor: tf.Tensor, num: int) -> tf.Tensor:
  """[B, ...] -> [num, B // num, ...] in the TensorFlow engine's order
  (steps.TENSORFLOW_ORDER: see bert_tf.training.steps for why)."""
  rows = tensor.shape[0]
  if rows is None:
    rows = tf.shape(tensor)[0]
  return steps.split_micro_batches(tensor, num, steps.TENSORFLOW_ORDER, rows,
                                   _reshape_leading,
                                   lambda t: tf.experimental.numpy.swapaxes(t, 0, 1))


def seed_each_replica(strategy: tf.distribute.Strategy, states: List) -> None:
  """Gives each replica dropout masks of its own.

  The state of a Keras SeedGenerator is a variable whose copies, one per replica, all
  start from the same value and advance alike: every replica would draw the same
  masks. Here the first replica keeps the state (the copy a checkpoint saves) and
  replica r > 0 takes a seed folded from it and r, with the same counter. Each copy
  then advances on its own; as the seed never changes, a resumed run derives what the
  uninterrupted one holds, and draws the same masks.

  Args:
    states: steps.seed_states(model), the SeedGenerators' state variables.
  """
  states = [getattr(state, "value", state) for state in states]
  if not states or strategy.num_replicas_in_sync == 1:
    return

  def fold_in_replica():
    replica = tf.distribute.get_replica_context().replica_id_in_sync_group
    for state in states:
      seed, counter = tf.unstack(state.read_value())
      folded = tf.cast(tf.random.experimental.stateless_fold_in(
          tf.stack([seed, tf.zeros_like(seed)]), replica, alg="philox")[0], seed.dtype)
      own = tf.where(replica == 0, seed, folded)
      tf.raw_ops.AssignVariableOp(resource=state.handle, value=tf.stack([own, counter]))

  tf.function(lambda: strategy.run(fold_in_replica))()


class TrainStep:
  """Builds the replica step and the tf.function that runs several steps per call.

  Args:
    strategy: the tf.distribute strategy the step runs under.
    model: the task's model.
    task: its losses, metrics and loss normalizers.
    optimizer: a bert_tf.training.tf_engine.optimizer optimizer (fused, masked update).
    step: the int64 step variable, advanced in the optimizer's launch.
    loss_scale: a DynamicLossScale under mixed_float16, else None.
    global_batch_size: the training batch the losses average over.
    global_clipnorm: clip the gradients to this global norm (0: no clipping).
    accumulation_steps: micro-batches per replica batch.
    jit_compile: XLA-compile the forward and backward pass.
    next_batch: reads one step's distributed batch from the training iterator.
    input_spec_fn: returns the element spec of one replica's batch (called once, to
      find the names of the task's losses and metrics).
  """

  def __init__(self, strategy: tf.distribute.Strategy, model: keras.Model,
               task: task_base.Task, optimizer, step: tf.Variable,
               loss_scale: Optional[DynamicLossScale], global_batch_size: int,
               global_clipnorm: float, accumulation_steps: int, jit_compile: bool,
               next_batch: Callable, input_spec_fn: Callable):
    self.strategy = strategy
    self.model = model
    self.task = task
    self.optimizer = optimizer
    self.step = step
    self.loss_scale = loss_scale
    self.global_batch_size = global_batch_size
    self.global_clipnorm = global_clipnorm
    self.accumulation_steps = accumulation_steps
    self.jit_compile = jit_compile
    self.next_batch = next_batch
    self.input_spec_fn = input_spec_fn
    self._output_names = None

  def forward_backward(self, features, normalizers, loss_scale):
    """Gradients, losses and metric sums of one (micro-)batch on one replica."""
    variables = self.model.trainable_variables
    with tf.GradientTape() as tape:
      outputs = self.model(self.task.model_inputs(features), training=True)
      losses = self.task.compute_loss(features, outputs, self.global_batch_size,
                                      **normalizers)
      loss = tf.cast(losses["loss"], tf.float32)
      scaled = loss * loss_scale if loss_scale is not None else loss
    grads = tape.gradient(scaled, variables)
    grads = [tf.zeros_like(v, tf.float32) if g is None else
             tf.cast(tf.convert_to_tensor(g), tf.float32) for g, v in zip(grads, variables)]
    metrics = self.task.train_metrics(features, outputs)
    losses = {k: tf.cast(v, tf.float32) for k, v in losses.items()}
    return grads, losses, metrics

  def compiled_forward_backward(self):
    if self.jit_compile:
      return tf.function(self.forward_backward, jit_compile=True)
    return self.forward_backward

  def replica_step(self, features, forward_backward) -> Dict[str, tf.Tensor]:
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
      micro = tf.nest.map_structure(lambda t: split_micro_batches(t, n), features)

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
    grad_norm, gradient_scale, step_finite = update_rule.gradient_scale(
        tf.linalg.global_norm(grads), losses["loss"], scale, self.global_clipnorm)
    step = self.step.read_value()
    # The step counter advances in the optimizer's own launch: the update and the count
    # are never seen apart, not even when a read error ends the loop mid-way.
    self.optimizer.apply_gradients(grads, variables, step, should_apply=step_finite,
                                   gradient_scale=gradient_scale, step_counter=self.step)
    out = steps.flat_outputs(losses, metrics)
    out[steps.GRADIENT_NORM] = grad_norm
    out[steps.LEARNING_RATE] = tf.cast(self.optimizer.learning_rate(step), tf.float32)
    stops = loss_scale_rule.stops_training(
        tf.math.is_finite(losses["loss"]),
        None if self.loss_scale is None else self.loss_scale.rule, scale)
    out[steps.NON_FINITE_LOSS_STEPS] = tf.cast(stops, tf.float32)
    out[steps.SKIPPED_STEPS] = 1.0 - tf.cast(step_finite, tf.float32)
    if self.loss_scale is not None:
      out[steps.LOSS_SCALE] = scale
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
      def probe(features):
        outputs = self.model(self.task.model_inputs(features), training=False)
        normalizers = self.task.loss_normalizers(features)
        losses = self.task.compute_loss(features, outputs, self.global_batch_size,
                                        **normalizers)
        return losses, self.task.train_metrics(features, outputs)

      concrete = tf.function(probe).get_concrete_function(self.input_spec_fn())
      losses, metrics = concrete.structured_outputs
      self._output_names = (sorted(losses), sorted(metrics))
    return self._output_names

  def output_keys(self) -> List[str]:
    """The names of the loop's totals (steps.output_keys)."""
    losses, metrics = self._task_output_names()
    return steps.output_keys(losses, metrics, self.loss_scale is not None)

  def make_train_loop(self):
    """The tf.function train_loop(iterator, num_steps) -> {output key: sum over the
    num_steps steps}."""
    keys = self.output_keys()
    forward_backward = self.compiled_forward_backward()
    strategy = self.strategy
    with strategy.scope():
      # The sums of the loop's step outputs, one copy per replica, added to inside
      # strategy.run and read once per loop: per step the host only reads the input
      # and launches the step (on a TPU every host-side op is a round trip).
      totals = tf.Variable(tf.zeros([len(keys)]), trainable=False, name="loop_totals",
                           synchronization=tf.VariableSynchronization.ON_WRITE,
                           aggregation=tf.VariableAggregation.NONE)

    def replica_step(features):
      out = self.replica_step(features, forward_backward)
      # Every replica holds the same all-reduced values and adds them to its own copy.
      tf.raw_ops.AssignAddVariableOp(resource=totals.handle,
                                     value=tf.stack([out[key] for key in keys]))

    @tf.function
    def train_loop(iterator, num_steps):
      """Runs num_steps (int32 scalar) steps; returns the sums of their outputs."""
      totals.assign(tf.zeros_like(totals))
      for _ in tf.range(num_steps):
        strategy.run(replica_step, args=(self.next_batch(iterator),))
      values = tf.unstack(strategy.experimental_local_results(totals)[0].read_value())
      return dict(zip(keys, values))

    return train_loop
