"""Tests of restore_items (warm starts by object) and of trainer checkpoint saving."""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import portable
from bert_tf.checkpoints import restore
from bert_tf.checkpoints import tf_checkpoints
from bert_tf.utils import errors
from bert_tf.models import BertEncoder
from bert_tf.models import BertPretrainer
from bert_tf.training import steps
from bert_tf.training.tf_engine import legacy_checkpoints
from bert_tf.training.trainer import Trainer

import trainer_helpers


def _pretrainer(seed, **overrides):
  import keras  # pylint: disable=g-import-not-at-top
  keras.utils.set_random_seed(seed)
  return BertPretrainer(BertEncoder(**dict(trainer_helpers.TINY_ENCODER, **overrides)))


def _save(model, directory):
  checkpoint = tf.train.Checkpoint(**model.checkpoint_items)
  return checkpoint.save(os.path.join(str(directory), "ckpt"))


def test_restore_items_restores_the_encoder_by_object_and_reports_it(tmp_path):
  source, target = _pretrainer(1), _pretrainer(2)
  prefix = _save(source, tmp_path)
  restored = restore.restore_items(prefix, target.checkpoint_items)
  assert restored == {"encoder": prefix}
  for a, b in zip(source.encoder.weights, target.encoder.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  # Heads were not requested, so they keep their own initialization.
  assert not np.array_equal(source.masked_lm.transform.kernel.numpy(),
                            target.masked_lm.transform.kernel.numpy())


def test_restore_items_from_a_directory_uses_its_latest_checkpoint(tmp_path):
  source, target = _pretrainer(1), _pretrainer(2)
  _save(_pretrainer(3), tmp_path)
  latest = _save(source, tmp_path)
  restored = restore.restore_items(str(tmp_path), target.checkpoint_items,
                                       items=("encoder", "masked_lm", "next_sentence"))
  assert set(restored.values()) == {latest}
  for a, b in zip(source.weights, target.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_restore_items_names_an_item_missing_from_the_checkpoint(tmp_path):
  source = _pretrainer(1)
  prefix = tf.train.Checkpoint(encoder=source.encoder).save(str(tmp_path / "ckpt"))
  with pytest.raises(KeyError, match="masked_lm") as raised:
    restore.restore_items(prefix, _pretrainer(2).checkpoint_items, items=("masked_lm",))
  # A user's mistake (e.g. the wrong --init_checkpoint): the tools report it in one line.
  assert errors.user_message(raised.value).startswith(f"Checkpoint {prefix} has no item")


def test_missing_checkpoint_is_an_error_naming_the_path(tmp_path):
  with pytest.raises(FileNotFoundError, match=str(tmp_path)):
    restore.restore_items(str(tmp_path), _pretrainer(1).checkpoint_items)


@pytest.mark.slow  # a training with several checkpoints
def test_trainer_saves_every_n_steps_keeps_the_last_k_and_follows_the_convention(tmp_path):
  experiment = trainer_helpers.tiny_experiment(
      steps=10, trainer=dict(steps_per_loop=2, checkpoint_interval=2, max_to_keep=2))
  trainer = Trainer(experiment, str(tmp_path), log_fn=lambda _: None)
  trainer.train()
  # The portable format on every engine, each checkpoint holding its input position.
  assert sorted(p for p in os.listdir(tmp_path) if p.startswith("ckpt-")) == [
      "ckpt-10.h5", "ckpt-8.h5"]
  children = restore.checkpoint_children(str(tmp_path / "ckpt-10.h5"))
  assert {"encoder", "masked_lm", "next_sentence", "optimizer", "step",
          "input"} <= children
  # A trainer checkpoint warm-starts a fresh model's encoder.
  fresh = _pretrainer(5)
  restore.restore_items(str(tmp_path), fresh.checkpoint_items)
  for a, b in zip(trainer.model.encoder.weights, fresh.encoder.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_init_checkpoint_warm_starts_the_encoder_and_reports_it(tmp_path):
  source = _pretrainer(1)
  prefix = _save(source, tmp_path / "init")
  experiment = trainer_helpers.tiny_experiment(
      steps=0, task=dict(name="pretraining", init_checkpoint=prefix))
  lines = []
  trainer = Trainer(experiment, str(tmp_path / "run"), log_fn=lines.append)
  trainer.initialize()
  assert trainer.initialized_from == {"encoder": prefix}
  assert any("Initialized encoder from" in line for line in lines)
  for a, b in zip(source.encoder.weights, trainer.model.encoder.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_checkpoint_directory_given_as_a_relative_path_resolves(tmp_path, monkeypatch):
  source = _pretrainer(1)
  tf.train.CheckpointManager(tf.train.Checkpoint(encoder=source.encoder),
                             str(tmp_path / "runs" / "a"), max_to_keep=2).save()
  monkeypatch.chdir(tmp_path)
  assert tf_checkpoints.checkpoint_candidates(os.path.join("runs", "a")) == [
      os.path.join("runs", "a", "ckpt-1")]
  assert restore.resolve_checkpoint(os.path.join("runs", "a")) == os.path.join(
      "runs", "a", "ckpt-1")


@pytest.mark.slow
def test_a_tensorflow_trainer_checkpoint_of_an_older_version_resumes_in_the_portable_format(
    tmp_path):
  experiment = trainer_helpers.tiny_experiment(steps=6)
  older = Trainer(experiment, str(tmp_path / "older"), log_fn=lambda _: None)
  older.train(train_steps=4)
  engine = older.engine
  # The trainer checkpoint older versions wrote: a tf.train.Checkpoint of these items.
  items = legacy_checkpoints.trainer_items(engine.model, engine.optimizer,
                                           engine.step_variable, None, steps.seed_states(engine.model))
  model_dir = tmp_path / "run"
  tf.train.CheckpointManager(tf.train.Checkpoint(**items), str(model_dir), max_to_keep=2,
                             step_counter=engine.step_variable).save(checkpoint_number=4)
  lines = []
  resumed = Trainer(experiment, str(model_dir), log_fn=lines.append)
  resumed.train()
  assert resumed.restored_from == str(model_dir / "ckpt-4") and resumed.step == 6
  assert os.path.exists(model_dir / "ckpt-6.h5")
  straight = Trainer(experiment, str(tmp_path / "straight"), log_fn=lambda _: None)
  straight.train()
  # The optimizer state came along: the resumed run continues the uninterrupted one.
  trainer_helpers.assert_weights_close(trainer_helpers.weights_of(straight.model),
                                       trainer_helpers.weights_of(resumed.model),
                                       atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("file_format", ["tensorflow", "portable"])
def test_an_encoder_of_another_size_is_an_error_naming_both_sizes(tmp_path, file_format):
  source = _pretrainer(1)
  if file_format == "portable":
    path = portable.save(str(tmp_path / "ckpt-1.h5"), source.checkpoint_items)
  else:
    path = _save(source, tmp_path)
  wider = _pretrainer(2, hidden_size=48, num_layers=3)
  with pytest.raises(restore.CheckpointSizeError) as raised:
    restore.restore_items(path, wider.checkpoint_items)
  assert errors.user_message(raised.value) == (
      f"Checkpoint {path} holds an encoder of another size than the model's: 2 layers, "
      "hidden size 32 in the checkpoint; 3 layers, hidden size 48 in the model. Set "
      "model.encoder to the checkpoint's size.")


@pytest.mark.slow  # three trainings
@pytest.mark.parametrize("sidecar", ["whole", "data file deleted"])
def test_a_checkpoint_of_an_earlier_version_resumes_at_its_iterator_beside_it(
    tmp_path, sidecar):
  """Version 2 kept the TensorFlow engine's position beside the .h5 as a tf.data
  iterator checkpoint: it still resumes there (or, its data file lost, by skipping the
  consumed batches, in one line), and the run goes on in the current format."""
  import glob  # pylint: disable=g-import-not-at-top
  import checkpoint_helpers  # pylint: disable=g-import-not-at-top
  from bert_tf.training.tf_engine import input as tf_input  # pylint: disable=g-import-not-at-top
  experiment = trainer_helpers.tiny_experiment(
      steps=5, trainer=dict(checkpoint_interval=3, max_to_keep=5))
  Trainer(experiment, str(tmp_path / "straight"), log_fn=lambda _: None).train()
  first = Trainer(experiment, str(tmp_path / "old"), log_fn=lambda _: None)
  first.train(train_steps=3)
  path = str(tmp_path / "old" / "ckpt-3.h5")
  checkpoint_helpers.rewrite_as_version_2(path)
  inputs = first.engine.training_input().inputs
  tf.train.Checkpoint(iterator=[inputs.worker_input(experiment.train_data, 3)],
                      layout=tf.Variable(inputs.layout, dtype=tf.int64)).write(
                          tf_input.position_prefix(path))
  if sidecar == "data file deleted":
    for data in glob.glob(tf_input.position_prefix(path) + ".data-*"):
      os.remove(data)
  lines = []
  resumed = Trainer(experiment, str(tmp_path / "old"), log_fn=lines.append)
  resumed.train()
  skipped = [line for line in lines if "consumed batches" in line]
  if sidecar == "whole":
    assert not skipped, lines
  else:
    assert any(line.startswith("Cannot restore the input iterator from ") for line in lines)
    assert skipped == [f"No input position of this input saved with {path}: skipped the "
                       "3 consumed batches"]
  expected = portable.arrays(str(tmp_path / "straight" / "ckpt-5.h5"))
  got = portable.arrays(str(tmp_path / "old" / "ckpt-5.h5"))
  assert got.keys() == expected.keys()
  for key in expected:
    np.testing.assert_array_equal(got[key], expected[key], err_msg=key)
