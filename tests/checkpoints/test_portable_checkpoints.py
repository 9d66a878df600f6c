"""Portable checkpoints (bert_tf.checkpoints.portable) and how restore reads them."""

import os

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

import checkpoint_helpers
import harness
from bert_tf import constants
from bert_tf.checkpoints import array_io
from bert_tf.checkpoints import portable
from bert_tf.checkpoints import portable_restore
from bert_tf.checkpoints import restore
from bert_tf.checkpoints import snapshots
from bert_tf.models import BertPretrainer


def _pretrainer(seed, **encoder):
  return BertPretrainer(harness.tiny_encoder(seed=seed, **encoder))


def test_items_round_trip_by_variable_path_without_seed_states(tmp_path):
  saved, fresh = _pretrainer(1), _pretrainer(2)
  path = portable.save(str(tmp_path / "ckpt-3.h5"), saved.checkpoint_items, step=3)
  assert portable.is_portable(path) and portable.step_of(path) == 3
  with h5py.File(path, "r") as f:
    assert "embeddings/word_embeddings" in f["items/encoder"]
    names = []
    f.visit(names.append)
  assert not any(constants.SEED_STATE_NAME in name for name in names)
  assert restore.checkpoint_children(path) == {"encoder", "masked_lm", "next_sentence",
                                               "step"}
  restore.restore_items(str(tmp_path), fresh.checkpoint_items,
                        ("encoder", "masked_lm", "next_sentence"))
  for a, b in zip(saved.trainable_variables, fresh.trainable_variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def test_a_file_url_reads_as_the_local_file_it_names(tmp_path):
  saved, fresh = _pretrainer(1), _pretrainer(2)
  path = portable.save(str(tmp_path / "ckpt-3.h5"), saved.checkpoint_items, step=3)
  portable.check_readable("file://" + path)
  restore.restore_items("file://" + path, fresh.checkpoint_items, ("encoder",))
  np.testing.assert_array_equal(saved.encoder.trainable_variables[0].numpy(),
                                fresh.encoder.trainable_variables[0].numpy())


def test_a_directory_resolves_to_its_newest_checkpoint_of_either_kind(tmp_path):
  model = _pretrainer(1)
  tf.train.Checkpoint(**model.checkpoint_items).save(str(tmp_path / "ckpt"))  # ckpt-1
  assert restore.resolve_checkpoint(str(tmp_path)).endswith("ckpt-1")
  portable.save(portable.path_for_step(str(tmp_path), 5), model.checkpoint_items, step=5)
  assert restore.resolve_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-5.h5")


def test_a_damaged_newest_portable_checkpoint_is_skipped_for_the_one_before(tmp_path):
  model = _pretrainer(1)
  for step in (2, 4):
    portable.save(portable.path_for_step(str(tmp_path), step), model.checkpoint_items,
                  step=step)
  newest = tmp_path / "ckpt-4.h5"
  newest.write_bytes(newest.read_bytes()[:3000])
  assert restore.resolve_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-2.h5")


def test_a_checkpoint_that_does_not_fit_the_model_is_an_error_naming_the_file(tmp_path):
  path = portable.save(str(tmp_path / "ckpt-1.h5"), _pretrainer(1).checkpoint_items)
  wider = _pretrainer(1, intermediate_size=96)
  with pytest.raises(portable.PortableCheckpointError, match=r"ckpt-1\.h5.*shape"):
    restore.restore_items(path, wider.checkpoint_items, ("encoder",))
  with pytest.raises(portable.PortableCheckpointError, match=r"ckpt-1\.h5 has no item"):
    restore.restore_items(path, {"classifier": keras.layers.Dense(2)}, ("classifier",))
  # An encoder of another depth is named with both sizes.
  deeper = _pretrainer(1, num_layers=3)
  with pytest.raises(restore.CheckpointSizeError, match="2 layers in the checkpoint; 3 "
                     "layers in the model"):
    restore.restore_items(path, deeper.checkpoint_items, ("encoder",))


def _slots(model, names=("m", "v")):
  """{`<slot>/<variable path>`: variable} shaped like the model's weights, and a count."""
  state = {constants.OPTIMIZER_COUNT: keras.Variable(0, dtype="int64")}
  for name in names:
    for variable in model.trainable_variables:
      state[f"{name}/{variable.path}"] = keras.Variable(np.full(variable.shape, 0.5))
  return state


def test_optimizer_state_round_trips_by_name_and_needs_the_same_names(tmp_path):
  model = _pretrainer(1)
  saved = _slots(model)
  path = portable.save(str(tmp_path / "ckpt-7.h5"), model.checkpoint_items, saved, step=7)
  with h5py.File(path, "r") as f:
    assert "optimizer/m/embeddings/word_embeddings" in f
  restored = _slots(model)
  for variable in restored.values():
    variable.assign(np.zeros(variable.shape))
  assert portable_restore.restore_trainer_state(path, restored) == 7
  for name, variable in saved.items():
    np.testing.assert_array_equal(restored[name].numpy(), variable.numpy(), err_msg=name)
  with pytest.raises(portable.PortableCheckpointError, match="another optimizer"):
    portable_restore.restore_trainer_state(path, _slots(model, names=()))  # SGD: a count alone
  assert not os.path.exists(portable.input_prefix(path) + ".index")


def test_optimizer_state_of_a_version_1_file_of_keras_variables_restores(tmp_path):
  """Version 1 held Keras AdamW's variables in order; their moments, loss scale and the
  step restore under the version 2 names."""
  model = _pretrainer(1)
  optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.AdamW(1e-3))
  optimizer.build(model.trainable_variables)
  for i, variable in enumerate(optimizer.variables):
    variable.assign(np.full(variable.shape, i + 1).astype(variable.dtype))
  path = str(tmp_path / "ckpt-9.h5")
  portable.save(path, model.checkpoint_items, step=9)
  checkpoint_helpers.rewrite_as_version_2(path)
  with h5py.File(path, "r+") as f:
    f.attrs["version"] = 1
    for i, variable in enumerate(optimizer.variables):
      f["optimizer"].create_dataset(f"{i:05d}", data=variable.numpy()).attrs["path"] = (
          variable.path)
  wanted = _slots(model)
  wanted[constants.LOSS_SCALE] = keras.Variable(1.0)
  wanted[constants.LOSS_SCALE_GOOD_STEPS] = keras.Variable(0, dtype="int64")
  assert portable_restore.restore_trainer_state(path, wanted) == 9
  by_path = {v.path.split("/", 1)[1]: v.numpy() for v in optimizer.variables}
  assert int(wanted[constants.OPTIMIZER_COUNT].numpy()) == 9
  assert float(wanted[constants.LOSS_SCALE].numpy()) == by_path["dynamic_scale"]
  assert int(wanted[constants.LOSS_SCALE_GOOD_STEPS].numpy()) == by_path["step_counter"]
  for variable in model.trainable_variables:
    keras_name = variable.path.replace("/", "_")
    np.testing.assert_array_equal(wanted[f"m/{variable.path}"].numpy(),
                                  by_path[f"{keras_name}_momentum"])
    np.testing.assert_array_equal(wanted[f"v/{variable.path}"].numpy(),
                                  by_path[f"{keras_name}_velocity"])


@pytest.mark.parametrize("path,where", [("memory://no-such-bucket/run", "bucket or folder"),
                                        ("LOCAL/no-such-run", "file or folder")])
def test_a_missing_checkpoint_without_tensorflow_says_nothing_is_there_not_what_tf_reads(
    tmp_path, monkeypatch, path, where):
  from bert_tf.utils import errors, file_systems  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(restore, "_tensorflow_installed", lambda: False)
  monkeypatch.setattr(file_systems, "_tensorflow_gfile", lambda: None)  # fsspec, os
  path = path.replace("LOCAL", str(tmp_path))
  with pytest.raises(errors.MissingInputError) as raised:
    restore.resolve_checkpoint(path)
  assert str(raised.value) == f"No checkpoint at {path}: no such {where}"


def test_arrays_reads_every_array_by_its_name_in_the_file_bfloat16_as_bfloat16(tmp_path):
  layer = keras.layers.Dense(3, dtype="bfloat16")
  layer.build((None, 2))
  path = portable.save(str(tmp_path / "ckpt-1.h5"), {"dense": layer}, step=1)
  expected = {f"dense/{name}": np.asarray(variable)
              for name, variable in snapshots.item_variables(layer).items()}
  items = portable.arrays(path, "items")
  assert items.keys() == expected.keys()
  for name, value in items.items():
    assert value.dtype == expected[name].dtype == "bfloat16", name
    np.testing.assert_array_equal(value, expected[name], err_msg=name)
  assert {f"items/{name}" for name in items} <= set(portable.arrays(path))


def test_tensorflow_variables_take_a_handed_over_arrays_memory_and_copy_a_kept_one(tmp_path):
  # 1 MiB: the size from which arrays are read aligned and may be shared.
  saved = tf.Variable(np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32))
  path = portable.write(str(tmp_path / "ckpt-1.h5"),
                        snapshots.snapshot({}, {"m/x": saved}, step=1))
  kept = portable.read(path)
  array = kept.arrays["optimizer/m/x"]
  assert array.nbytes >= array_io.LARGE_BYTES and array.ctypes.data % 64 == 0
  copied = tf.Variable(tf.zeros_like(saved))
  portable_restore.restore_trainer_state(kept, {"m/x": copied})
  copied.assign_add(tf.ones_like(copied))
  np.testing.assert_array_equal(array, saved.numpy())  # the kept array is untouched
  handed = portable.read(path)
  taken = tf.Variable(tf.zeros_like(saved))
  portable_restore.restore_trainer_state(handed, {"m/x": taken}, hand_over=True)
  np.testing.assert_array_equal(taken.numpy(), saved.numpy())
  handed.arrays["optimizer/m/x"][0, 0] = 7.0  # what the contract forbids: shows the sharing
  assert taken.numpy()[0, 0] == 7.0
