"""LoRA fine-tuning: only adapters and head train, checkpoints hold only them, and the
merged export computes what the adapted model computes."""


import keras
import numpy as np
import pytest
import tensorflow as tf

import export_helpers as helpers
import kernels_helpers
from bert_tf import configs
from bert_tf import constants
from bert_tf.checkpoints import restore
from bert_tf.checkpoints import trackables
from bert_tf.export import exporter
from bert_tf.kernels.tensorflow_cpu import hooks as cpu_hooks
from bert_tf.models import lora
from bert_tf.tasks import base
from bert_tf.training import trained_model

MNLI = {"name": "sentence_prediction", "glue_task": "mnli"}
RANK = 2


def _lora_experiment(vocab, init_checkpoint, targets=("query", "value", "intermediate")):
  config = helpers.experiment(vocab, dict(MNLI, init_checkpoint=init_checkpoint))
  return config.override({"model": {"lora_rank": RANK, "lora_targets": list(targets)}})


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  """(vocab, base checkpoint prefix): a trained-looking encoder to adapt."""
  tmp = tmp_path_factory.mktemp("lora")
  vocab = helpers.write_vocab(tmp)
  model = helpers.build_model(helpers.experiment(vocab, MNLI), seed=3)
  return vocab, helpers.save_checkpoint(model, tmp / "base")


def _inputs(seed=0, batch=4):
  rng = np.random.default_rng(seed)
  length = helpers.SEQ_LENGTH
  mask = np.ones((batch, length), np.int32)
  mask[:, length - 6:] = 0
  return {constants.INPUT_WORD_IDS: rng.integers(5, 40, (batch, length)).astype(np.int32),
          constants.INPUT_MASK: mask,
          constants.INPUT_TYPE_IDS: np.zeros((batch, length), np.int32)}


def _is_trained(variable):
  return "lora_kernel" in variable.path or variable.path.startswith("classifier/")


def _randomize_adapters(model, seed=5):
  rng = np.random.default_rng(seed)
  for a, b in model.lora_adapters.kernels.values():
    a.assign(rng.normal(0, 0.3, a.shape).astype(np.float32))
    b.assign(rng.normal(0, 0.3, b.shape).astype(np.float32))


def test_only_adapters_and_head_are_trainable(setup):
  vocab, base_checkpoint = setup
  model = trained_model.build(base.get_task(_lora_experiment(vocab, base_checkpoint)))
  trainable = model.trainable_variables
  assert trainable and all(_is_trained(v) for v in trainable)
  # 2 blocks x 3 targets x (A, B), and the head's kernel and bias.
  assert len(trainable) == 2 * 3 * 2 + 2
  assert {v.path for v in model.weights if _is_trained(v)} == {v.path for v in trainable}


@pytest.mark.parametrize("fused", [True, False])
def test_a_step_changes_only_adapters_and_head(setup, fused):
  vocab, base_checkpoint = setup
  keras.utils.set_random_seed(0)
  model = trained_model.build(base.get_task(_lora_experiment(vocab, base_checkpoint)))
  _randomize_adapters(model)
  before = {v.path: np.array(v.numpy()) for v in model.weights}
  inputs = {k: tf.constant(v) for k, v in _inputs().items()}
  labels = tf.constant([0, 1, 2, 1])
  optimizer = keras.optimizers.SGD(0.5)

  @tf.function
  def step():
    with tf.GradientTape() as tape:
      logits = model(inputs, training=True)["logits"]
      loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply(grads, model.trainable_variables)

  with kernels_helpers.kernels_of(model, cpu_hooks.KERNELS if fused else None):
    step()
  changed = {v.path for v in model.weights if not np.array_equal(v.numpy(), before[v.path])}
  assert changed == {v.path for v in model.trainable_variables}


def test_checkpoint_holds_only_adapters_and_head_and_restores_onto_the_base(setup, tmp_path):
  vocab, base_checkpoint = setup
  experiment = _lora_experiment(vocab, base_checkpoint)
  model = trained_model.build(base.get_task(experiment))
  _randomize_adapters(model)
  expected = model(_inputs(), training=False)["logits"].numpy()
  prefix = tf.train.Checkpoint(**trackables.as_trackables(model.trained_items)).save(
      str(tmp_path / "ckpt"))
  assert restore.checkpoint_children(prefix) == {"lora", "classifier"}
  # The adapters keep the key layout of the checkpoints written before they were a
  # backend-neutral container, so those still restore.
  keys = [name for name, _ in tf.train.list_variables(prefix) if name.startswith("lora/")]
  assert ("lora/kernels/transformer_layer_0..query/0/.ATTRIBUTES/VARIABLE_VALUE"
          in keys), keys
  saved = sum(int(np.prod(shape)) for name, shape in
              tf.train.list_variables(prefix)
              if name.split("/")[0] in ("lora", "classifier"))
  assert saved == sum(int(np.prod(v.shape)) for v in model.trainable_variables)

  merged = trained_model.model_from_checkpoint(trained_model.load_experiment(experiment), prefix)
  dense = lora.target_layers(merged.encoder, experiment.model.lora_targets)
  assert not any(layer.lora_enabled for layer in dense.values())
  for on in (True, False):
    with kernels_helpers.kernels_of(merged, cpu_hooks.KERNELS if on else None):
      got = tf.function(lambda x: merged(x, training=False))(_inputs())["logits"].numpy()
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)


def test_merged_export_serves_what_the_adapted_model_computes(setup, tmp_path):
  vocab, base_checkpoint = setup
  experiment = _lora_experiment(vocab, base_checkpoint, targets=configs.LORA_TARGETS)
  model = trained_model.build(base.get_task(experiment))
  _randomize_adapters(model, seed=9)
  inputs = _inputs(seed=2)
  expected = tf.nn.softmax(model(inputs, training=False)["logits"]).numpy()
  prefix = tf.train.Checkpoint(**trackables.as_trackables(model.trained_items)).save(
      str(tmp_path / "ckpt"))
  path = exporter.export_from_checkpoint(prefix, experiment, str(tmp_path / "export"))
  served = tf.saved_model.load(path).signatures["serve_token_ids"](
      **{k: tf.constant(v) for k, v in inputs.items()})
  np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=1e-5)
  # Adapters off, the same base gives other outputs: the adapters are in the export.
  plain = helpers.build_model(helpers.experiment(vocab, MNLI))
  restore.restore_items(base_checkpoint, plain.checkpoint_items, items=("encoder",))
  assert not np.allclose(tf.nn.softmax(plain(inputs)["logits"]).numpy()[:, :1],
                         expected[:, :1], atol=1e-3)


def test_a_merged_model_converts_to_bf16_with_the_adapters_folded_in(setup):
  vocab, base_checkpoint = setup
  experiment = _lora_experiment(vocab, base_checkpoint)
  model = trained_model.build(base.get_task(experiment))
  _randomize_adapters(model, seed=11)
  inputs = _inputs(seed=3)
  expected = model(inputs, training=False)["logits"].numpy()
  lora.merge(model)
  converted = exporter.to_bfloat16(trained_model.load_experiment(experiment), model)
  # The merged (unused) adapter variables stay behind; every other weight is copied.
  assert not any("lora" in w.path for w in converted.weights)
  got = converted(inputs, training=False)["logits"].numpy()
  # bf16's rounding over two blocks and a head (tests/export/test_export_bfloat16.py).
  np.testing.assert_allclose(got, expected, atol=10 * 2.0 ** -9 * np.abs(expected).max())


def test_lora_needs_an_init_checkpoint(setup):
  vocab, _ = setup
  with pytest.raises(configs.ConfigError, match="init_checkpoint"):
    trained_model.build(base.get_task(_lora_experiment(vocab, "")))
