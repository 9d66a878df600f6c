"""The jit-compiled training and evaluation steps of a Keras model on the JAX backend.

Task-free and TensorFlow-free (it imports only jax, keras and the steps' shared names,
bert_tf.training.steps), so that a program on a
machine with nothing but JAX and Keras can train a bert_tf model:

  optimizer = stateless_optimizer.build_stateless_optimizer(config, steps, variables)
  state = jax_step.state_from(model, optimizer)
  step = jax_step.make_train_step(model, optimizer, loss_fn)
  for batch in batches:                     # dicts of numpy arrays, the global batch
    state, logs = step(state, jax_step.shard_batch(batch))
  jax_step.write_back(state, model, optimizer)

One call of `step` is one optimizer update on one global batch, as the TensorFlow
engine's step (bert_tf.training.tf_engine.step) makes it:
  1. `normalizers_fn(batch)` sums loss denominators over the whole (global) batch;
  2. with `accumulation_steps = N` the batch is split into N micro-batches (rows i,
     i + N, i + 2N, ... form micro-batch i: steps.JAX_ORDER); otherwise the whole batch
     is one micro-batch;
  3. each micro-batch runs `model.stateless_call(..., training=True)`, the loss (times
     the loss scale under mixed_float16) and `jax.value_and_grad`; the gradients are
     summed over the micro-batches (each loss is its share of the global batch's);
  4. the optimizer (bert_tf.training.jax_engine.optimizer) removes the loss scale, clips
     to the global norm and updates, or skips the step where the gradients or the loss
     are not finite.
The state's buffers are donated: the arrays passed in are invalid after the call.

Under a `keras.distribution` (DataParallel) the state keeps the shardings its arrays
had (replicated) and the batch is split along its first axis over the devices
(`shard_batch`); sums over the batch inside the step are sums over the global batch.
"""

from typing import Callable, Dict, Mapping, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import keras

from bert_tf.training import steps

Batch = Mapping[str, jax.Array]
# (batch, model outputs, normalizers) -> {name: float32 scalar}, with at least "loss".
LossFn = Callable[[Batch, Mapping[str, jax.Array], Mapping[str, jax.Array]],
                  Dict[str, jax.Array]]


class TrainState(NamedTuple):
  """The values of a model's and its optimizer's variables, as JAX arrays.

  trainable: model.trainable_variables' values, in that order.
  non_trainable: model.non_trainable_variables' values (dropout seed states, ...).
  optimizer: optimizer.variables' values (the update count, moments, loss scale).
  """

  trainable: Tuple[jax.Array, ...]
  non_trainable: Tuple[jax.Array, ...]
  optimizer: Tuple[jax.Array, ...]


def state_from(model: keras.Model, optimizer) -> TrainState:
  """The current values of `model`'s and `optimizer`'s variables.

  Builds the optimizer over model.trainable_variables when it is not built yet.
  """
  return _map_state(lambda v: v.value, _state_variables(model, optimizer))


def write_back(state: TrainState, model: keras.Model, optimizer=None) -> None:
  """Assigns `state`'s values to the model's (and optimizer's) variables, e.g. before
  saving a checkpoint or calling the model eagerly."""
  pairs = list(zip(model.trainable_variables, state.trainable))
  pairs += zip(model.non_trainable_variables, state.non_trainable)
  if optimizer is not None:
    pairs += zip(optimizer.variables, state.optimizer)
  for variable, value in pairs:
    variable.assign(value)


def shard_batch(batch: Mapping[str, object]) -> Dict[str, jax.Array]:
  """A batch of host arrays as device arrays: split along the first axis over the
  devices of the current keras.distribution (each process passes its own share of the
  global batch), or placed on the default device without one."""
  if keras.distribution.distribution() is None:
    return {key: jax.device_put(value) for key, value in batch.items()}
  return {key: jax.make_array_from_process_local_data(batch_sharding(value.shape), value)
          for key, value in batch.items()}


def batch_sharding(shape: Tuple[int, ...]):
  """The sharding of a batch array of `shape` (the global batch's, or this process's
  share) under the current keras.distribution: split along the first axis over its
  devices; None without one."""
  distribution = keras.distribution.distribution()
  return None if distribution is None else distribution.get_data_layout(shape).backend_layout


def _micro_batches(batch: Batch, num: int) -> Batch:
  """[B, ...] -> [num, B // num, ...] in the JAX engine's order (steps.JAX_ORDER: see
  bert_tf.training.steps for why)."""
  def split(x):
    return steps.split_micro_batches(
        x, num, steps.JAX_ORDER, x.shape[0],
        lambda x, leading: jnp.reshape(x, tuple(leading) + x.shape[1:]),
        lambda x: jnp.swapaxes(x, 0, 1))
  return {key: split(value) for key, value in batch.items()}


def _map_state(fn, state: TrainState) -> TrainState:
  """`fn` of each of the state's leaves (keras Variables are no pytree leaves)."""
  return TrainState(*(tuple(map(fn, part)) for part in state))


def _state_variables(model, optimizer) -> TrainState:
  """The variables whose values form the state, in its order (builds the optimizer)."""
  if not optimizer.built:
    optimizer.build(model.trainable_variables)
  return TrainState(tuple(model.trainable_variables), tuple(model.non_trainable_variables),
                    tuple(optimizer.variables))


def _state_shardings(model, optimizer):
  """The shardings of the state's arrays under a keras.distribution (each variable's
  layout there, which its value has), else None."""
  distribution = keras.distribution.distribution()
  if distribution is None:
    return None
  return _map_state(lambda v: distribution.get_variable_layout(v).backend_layout,
                    _state_variables(model, optimizer))


def abstract_state(model: keras.Model, optimizer) -> TrainState:
  """The state as jax.ShapeDtypeStructs (with the keras.distribution's shardings),
  read from the variables' shapes and dtypes, never their values: variables built in
  a keras.StatelessScope, which hold none, give it too (the ahead-of-time compile)."""
  distribution = keras.distribution.distribution()
  return _map_state(lambda v: jax.ShapeDtypeStruct(
      tuple(v.shape), v.dtype,
      sharding=distribution and distribution.get_variable_layout(v).backend_layout),
                    _state_variables(model, optimizer))


def make_train_step(model: keras.Model, optimizer, loss_fn: LossFn,
                    normalizers_fn: Optional[Callable[[Batch], Dict[str, jax.Array]]] = None,
                    inputs_fn: Optional[Callable[[Batch], object]] = None,
                    accumulation_steps: int = 1, jit: bool = True):
  """The training step `step(state, batch) -> (state, logs)`.

  Args:
    model: a built Keras model (its variables define the state's order).
    optimizer: a built bert_tf.training.jax_engine.optimizer.StatelessOptimizer over
      model.trainable_variables (its rule, global_clipnorm and loss scale).
    loss_fn: (micro-batch, outputs, normalizers) -> {name: float32 scalar}; "loss" is
      minimized. Values must add up over micro-batches: divide by the global
      batch's denominators (normalizers, the global batch size), not the
      micro-batch's.
    normalizers_fn: batch -> {name: float32 scalar} sums over the whole global batch
      (e.g. the masked-LM weight sum), passed to loss_fn; default none.
    inputs_fn: batch -> the model's inputs; default the batch itself.
    accumulation_steps: micro-batches per step (trainer.gradient_accumulation_steps).
    jit: compile with jax.jit (state donated); False runs eagerly (for debugging).

  Returns:
    step(state: TrainState, batch: {name: [B, ...] array}) -> (TrainState, logs):
    logs are float32 scalars: loss_fn's values summed over the micro-batches, and the
    optimizer's gradient_norm (before clipping), learning_rate (of this update),
    skipped_steps, non_finite_loss_steps (and loss_scale under mixed_float16).
  """
  inputs_fn = inputs_fn or (lambda batch: batch)

  def scaled_loss(trainable, non_trainable, loss_scale, batch, normalizers):
    outputs, non_trainable = model.stateless_call(trainable, non_trainable,
                                                  inputs_fn(batch), training=True)
    values = {k: jnp.asarray(v, jnp.float32) for k, v in
              loss_fn(batch, outputs, normalizers).items()}
    loss = values["loss"] if loss_scale is None else values["loss"] * loss_scale
    return loss, (values, non_trainable)

  grad_fn = jax.value_and_grad(scaled_loss, has_aux=True)

  def step(state: TrainState, batch: Batch):
    normalizers = normalizers_fn(batch) if normalizers_fn else {}
    loss_scale = optimizer.loss_scale(state.optimizer)
    if accumulation_steps == 1:
      (_, (values, non_trainable)), grads = grad_fn(
          state.trainable, state.non_trainable, loss_scale, batch, normalizers)
    else:
      def body(carry, micro):
        non_trainable, summed = carry
        (_, (values, non_trainable)), grads = grad_fn(
            state.trainable, non_trainable, loss_scale, micro, normalizers)
        return (tuple(non_trainable), [a + g for a, g in zip(summed, grads)]), values

      zeros = [jnp.zeros(v.shape, v.dtype) for v in state.trainable]
      (non_trainable, grads), values = jax.lax.scan(
          body, (state.non_trainable, zeros), _micro_batches(batch, accumulation_steps))
      values = {k: jnp.sum(v) for k, v in values.items()}
    trainable, optimizer_values, logs = optimizer.apply(
        state.optimizer, state.trainable, grads, values["loss"])
    logs.update(values)
    return TrainState(tuple(trainable), tuple(non_trainable), tuple(optimizer_values)), logs

  if not jit:
    return step
  shardings = _state_shardings(model, optimizer)
  out_shardings = None if shardings is None else (shardings, None)
  return jax.jit(step, donate_argnums=0, out_shardings=out_shardings)


def make_eval_step(model: keras.Model,
                   outputs_fn: Callable[[Batch, Mapping[str, jax.Array]], Dict[str, jax.Array]],
                   inputs_fn: Optional[Callable[[Batch], object]] = None):
  """The evaluation step `eval_step(state, batch) -> outputs_fn(batch, outputs)`,
  jit-compiled (once per batch shape), with the model in inference mode. `state` is a
  TrainState (its optimizer part is not read)."""
  inputs_fn = inputs_fn or (lambda batch: batch)

  @jax.jit
  def eval_step(trainable, non_trainable, batch):
    outputs, _ = model.stateless_call(trainable, non_trainable, inputs_fn(batch),
                                      training=False)
    return outputs_fn(batch, outputs)

  return lambda state, batch: eval_step(state.trainable, state.non_trainable, batch)
