"""Tests of the TensorFlow engine's optimizer: weight-decay exclusions, the fused update,
global-norm clipping, checkpoints, and how it (and Keras 3 optimizers) behaves under
tf.distribute. The update formulas of both engines: tests/training/test_engines_agree.py."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import configs
from bert_tf.models import BertEncoder
from bert_tf.models import BertPretrainer
from bert_tf.training.tf_engine import optimizer as optimizers
from bert_tf.training.tf_engine import strategies
from bert_tf.training.trainer import Trainer
from bert_tf.training.update_rule import UpdateRule

import finetuning_helpers
import trainer_helpers


def _constant(lr):
  return lambda step: tf.constant(lr, tf.float32)


def _make(paths_values, algorithm, lr=0.1, wd=0.01):
  keras_vars = []
  for path, value in paths_values:
    with keras.name_scope(path.rsplit("/", 1)[0]):
      keras_vars.append(keras.Variable(np.array(value, np.float32),
                                       name=path.rsplit("/", 1)[1]))
  opt = optimizers.Optimizer(UpdateRule(algorithm, _constant(lr), weight_decay_rate=wd,
                                        exclude_from_weight_decay=["layer_norm", "bias"],
                                        beta_1=0.9, beta_2=0.999, epsilon=1e-6))
  opt.build(keras_vars)
  return opt, keras_vars


def test_weight_decay_excludes_every_layer_norm_and_bias_of_the_real_model():
  encoder = BertEncoder(**trainer_helpers.TINY_ENCODER)
  model = BertPretrainer(encoder)
  opt = optimizers.build_optimizer(configs.OptimizerConfig(), train_steps=10)
  decayed = {v.path for v in model.trainable_variables if opt.decays(v)}
  not_decayed = {v.path for v in model.trainable_variables if not opt.decays(v)}
  for path in ("embeddings/layer_norm/gamma", "embeddings/layer_norm/beta",
               "transformer_layer_0/attention/query/bias",
               "transformer_layer_1/attention_layer_norm/gamma",
               "transformer_layer_1/output_layer_norm/beta", "pooler/bias",
               "masked_lm/output_bias", "masked_lm/transform_layer_norm/gamma",
               "next_sentence/dense/bias"):
    assert path in not_decayed
  for path in ("embeddings/word_embeddings", "embeddings/position_embeddings",
               "transformer_layer_0/attention/query/kernel",
               "transformer_layer_1/intermediate/kernel", "pooler/kernel",
               "masked_lm/transform/kernel", "next_sentence/dense/kernel"):
    assert path in decayed
  # Exactly: kernels and embedding tables are decayed; nothing else.
  assert all(p.endswith(("kernel", "embeddings")) for p in decayed)
  assert all(p.endswith(("bias", "gamma", "beta")) for p in not_decayed)


@pytest.mark.parametrize("algorithm", ["adamw", "lamb", "sgd"])
def test_should_apply_false_leaves_variables_and_slots_unchanged(algorithm):
  opt, (kernel,) = _make([("dense/kernel", [1.0, 2.0])], algorithm)
  opt.apply_gradients([tf.constant([0.5, 1.0])], [kernel], step=0)
  before = [kernel.numpy()] + [slot.numpy() for slot in opt.slots["dense/kernel"].values()]
  # A non-finite gradient makes the clipping scale non-finite too.
  opt.apply_gradients([tf.constant([np.nan, np.inf])], [kernel], step=1, should_apply=False,
                      gradient_scale=tf.constant(np.nan))
  after = [kernel.numpy()] + [slot.numpy() for slot in opt.slots["dense/kernel"].values()]
  for old, new in zip(before, after):
    np.testing.assert_array_equal(new, old)


@pytest.mark.parametrize("algorithm", ["adamw", "lamb", "sgd"])
def test_fused_update_equals_the_unfused_one_and_applies_the_gradient_scale(algorithm):
  results = []
  for jit_compile in (True, False):
    opt, (kernel, bias) = _make([("dense/kernel", [1.0, -2.0, 0.5]),
                                 ("dense/bias", [0.5, 0.5, -1.0])], algorithm)
    opt.jit_compile = jit_compile
    for t, scale in enumerate((0.5, 2.0)):
      grads = [tf.constant([0.3, -0.1, 2.0]), tf.constant([0.2, 0.4, -0.6])]
      opt.apply_gradients(grads, [kernel, bias], step=t, gradient_scale=scale)
    results.append([kernel.numpy(), bias.numpy()] +
                   [s.numpy() for slots in opt.slots.values() for s in slots.values()])
  for fused, plain in zip(*results):
    np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-7)
  # The scale multiplies the gradient: scale 0.5 on g is the update of 0.5 * g.
  opt, (kernel,) = _make([("dense/kernel", [1.0, -2.0])], algorithm)
  ref, (ref_kernel,) = _make([("dense/kernel", [1.0, -2.0])], algorithm)
  opt.apply_gradients([tf.constant([0.4, -0.2])], [kernel], step=0, gradient_scale=0.5)
  ref.apply_gradients([tf.constant([0.2, -0.1])], [ref_kernel], step=0)
  np.testing.assert_allclose(kernel.numpy(), ref_kernel.numpy(), rtol=1e-6)


def test_checkpoint_saves_and_restores_after_the_update_functions_exist(tmp_path):
  opt, (kernel,) = _make([("dense/kernel", [1.0, -2.0])], "adamw")
  opt.apply_gradients([tf.constant([0.4, -0.2])], [kernel], step=0)
  path = tf.train.Checkpoint(optimizer=opt, kernel=kernel).save(str(tmp_path / "ckpt"))
  fresh, (fresh_kernel,) = _make([("dense/kernel", [0.0, 0.0])], "adamw")
  tf.train.Checkpoint(optimizer=fresh, kernel=fresh_kernel).restore(path).assert_consumed()
  np.testing.assert_array_equal(fresh_kernel.numpy(), kernel.numpy())
  np.testing.assert_array_equal(fresh.slots["dense/kernel"]["m"].numpy(),
                                opt.slots["dense/kernel"]["m"].numpy())


def test_unknown_algorithm_is_an_error():
  with pytest.raises(ValueError, match="algorithm"):
    UpdateRule("adagrad", _constant(0.1))


def _mirrored():
  devices = [d.name for d in tf.config.list_logical_devices("CPU")]
  if len(devices) < 2:
    pytest.skip("needs two logical CPU devices (tests/conftest.py)")
  return strategies.mirrored_strategy(devices[:2])


def test_keras_apply_gradients_in_replica_context_sums_gradients_across_replicas():
  strategy = _mirrored()
  with strategy.scope():
    var = keras.Variable(0.0)
    opt = keras.optimizers.SGD(learning_rate=1.0)
    opt.build([var])

  @tf.function
  def step():
    def fn():
      replica = tf.distribute.get_replica_context().replica_id_in_sync_group
      grad = tf.cast(replica, tf.float32) + 1.0  # 1 on replica 0, 2 on replica 1
      opt.apply_gradients([(grad, var)])
    strategy.run(fn)

  step()
  # Summed (1 + 2), not averaged and not one replica's: the reason this library
  # all-reduces gradients itself and uses an optimizer that does not reduce again.
  assert float(var.numpy()) == pytest.approx(-3.0)


def test_optimizer_applies_already_reduced_gradients_once_under_mirrored_strategy():
  strategy = _mirrored()
  with strategy.scope():
    with keras.name_scope("dense"):
      var = keras.Variable(np.array([1.0, 1.0], np.float32), name="kernel")
    opt = optimizers.Optimizer(UpdateRule("sgd", _constant(0.5)))
    opt.build([var])

  @tf.function
  def step():
    def fn():
      opt.apply_gradients([tf.constant([2.0, -2.0])], [var], step=tf.constant(0, tf.int64))
    strategy.run(fn)

  step()
  for component in strategy.experimental_local_results(var.value):
    np.testing.assert_allclose(component.numpy(), [0.0, 2.0])



def test_skip_flag_known_only_at_run_time_skips_or_applies_inside_a_tf_function():
  opt, (kernel,) = _make([("dense/kernel", [1.0, 2.0])], "adamw")
  flag = tf.Variable(False)

  @tf.function
  def step(grad):
    opt.apply_gradients([grad], [kernel], step=0, should_apply=flag.read_value())

  step(tf.constant([np.nan, 1.0]))
  np.testing.assert_array_equal(kernel.numpy(), [1.0, 2.0])
  np.testing.assert_array_equal(opt.slots["dense/kernel"]["m"].numpy(), [0.0, 0.0])
  flag.assign(True)
  step(tf.constant([0.5, 1.0]))
  reference, (ref_kernel,) = _make([("dense/kernel", [1.0, 2.0])], "adamw")
  reference.apply_gradients([tf.constant([0.5, 1.0])], [ref_kernel], step=0)
  np.testing.assert_allclose(kernel.numpy(), ref_kernel.numpy(), rtol=1e-6)
  np.testing.assert_allclose(opt.slots["dense/kernel"]["v"].numpy(),
                             reference.slots["dense/kernel"]["v"].numpy(), rtol=1e-6)


@pytest.mark.parametrize("algorithm", ["adamw", "lamb"])
def test_same_shaped_variables_each_get_their_own_update_under_mirrored_strategy(algorithm):
  """The compiled in-place update is traced once per decay setting and handed each
  variable (each replica's component) in turn: no variable may get another's update."""
  strategy = _mirrored()
  values = {"a/kernel": [1.0, -1.0], "b/kernel": [2.0, 0.5], "c/kernel": [-3.0, 4.0]}
  grads = {"a/kernel": [0.1, 0.2], "b/kernel": [-0.3, 0.7], "c/kernel": [0.9, -0.4]}
  with strategy.scope():
    opt, variables = _make(list(values.items()), algorithm)
  reference, ref_variables = _make(list(values.items()), algorithm)

  @tf.function
  def step(t):
    def fn():
      opt.apply_gradients([tf.constant(g) for g in grads.values()], variables, step=t)
    strategy.run(fn)

  for t in range(2):
    step(tf.constant(t, tf.int64))
    reference.apply_gradients([tf.constant(g) for g in grads.values()], ref_variables,
                              step=t)
  for var, ref in zip(variables, ref_variables):
    for component in strategy.experimental_local_results(var.value):
      np.testing.assert_allclose(component.numpy(), ref.numpy(), rtol=1e-6)
  assert len({tuple(np.round(v.numpy(), 4)) for v in ref_variables}) == 3


def test_trainer_scales_a_large_gradient_to_global_norm_one_as_clip_by_global_norm(tmp_path):
  experiment = finetuning_helpers.tiny_experiment(
      {"name": "sentence_prediction", "num_classes": 3}, {"format": "dummy"},
      learning_rate=0.5).override({"optimizer": {"type": "sgd", "global_clipnorm": 1.0}})
  trainer = Trainer(experiment, str(tmp_path))
  task, model = trainer.task, trainer.model
  compute_loss = task.compute_loss
  # A loss 1000 times larger: its gradient's global norm is far above 1.
  task.compute_loss = lambda *args: {k: 1000.0 * v for k, v in compute_loss(*args).items()}
  variables = model.trainable_variables
  before = [v.numpy().copy() for v in variables]
  report = trainer.train()
  norm = report["gradient_norm"]
  assert norm > 10.0
  # SGD without decay: the update is -learning_rate * clipped gradient.
  applied = [(b - v.numpy()) / 0.5 for b, v in zip(before, variables)]
  assert float(tf.linalg.global_norm(applied)) == pytest.approx(1.0, rel=1e-4)
  # The unclipped gradient is applied * norm; clip_by_global_norm gives back `applied`.
  reference, reference_norm = tf.clip_by_global_norm([a * norm for a in applied], 1.0)
  assert float(reference_norm) == pytest.approx(norm, rel=1e-4)
  for variable, got, want in zip(variables, applied, reference):
    np.testing.assert_allclose(got, want.numpy(), atol=1e-6, err_msg=variable.path)
