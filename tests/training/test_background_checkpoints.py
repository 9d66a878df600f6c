"""Checkpoints written on a background thread (trainer.async_checkpoints): training goes
on while a save is written, the file holds the values of its step, the save is logged
once it is committed, and a failed write is raised on the training thread naming the
path."""

import os
import threading

import numpy as np
import pytest

import trainer_helpers
from bert_tf.checkpoints import portable
from bert_tf.training import checkpoint_errors
from bert_tf.training import checkpointing
from bert_tf.training.trainer import Trainer
from bert_tf.utils import errors


def _experiment(asynchronous=True, steps=4):
  return trainer_helpers.tiny_experiment(
      steps=steps, model=dict(encoder=dict(trainer_helpers.TINY_ENCODER, dropout_rate=0.1)),
      trainer=dict(steps_per_loop=1, log_interval=1, summary_interval=1,
                   checkpoint_interval=2, async_checkpoints=asynchronous))


def _saved_weights(path):
  """{variable path: array} of the model items of a portable checkpoint."""
  return {key.split("/", 2)[2]: value for key, value in portable.arrays(path).items()
          if key.startswith("items/")}


def test_steps_go_on_while_a_checkpoint_is_written_and_it_holds_its_steps_values(
    tmp_path, monkeypatch):
  write = portable.write
  released = threading.Event()
  seen, lines = {}, []
  model_dir = tmp_path / "run"

  def held_write(path, content):
    if portable.step_of(path) == 2:
      assert released.wait(60), "the training thread never ran step 3"
    return write(path, content)

  def log(line):
    lines.append(line)
    if line.startswith("Saved checkpoint "):
      seen[line] = os.path.exists(line.split(" ", 2)[2])
    if line.startswith("step 2/"):  # logged after step 2, before its save
      seen["weights at step 2"] = trainer_helpers.weights_of(trainer.model)
    if line.startswith("step 3/"):  # while ckpt-2 is being written
      seen["ckpt-2 written at step 3"] = os.path.exists(model_dir / "ckpt-2.h5")
      seen["writing at step 3"] = trainer.checkpoints.writing
      released.set()

  monkeypatch.setattr(portable, "write", held_write)
  trainer = Trainer(_experiment(), str(model_dir), log_fn=log)
  trainer.train()
  assert seen.pop("ckpt-2 written at step 3") is False
  assert seen.pop("writing at step 3") is True
  assert trainer.step == 4
  assert not trainer.checkpoints.writing  # train() returned after the last write
  # Each save is logged once, when its file is in place: ckpt-2 after step 3.
  saved = [f"Saved checkpoint {model_dir / name}" for name in ("ckpt-2.h5", "ckpt-4.h5")]
  assert [line for line in lines if line.startswith("Saved checkpoint")] == saved
  assert [seen.pop(line) for line in saved] == [True, True]
  assert lines.index(saved[0]) > next(
      i for i, line in enumerate(lines) if line.startswith("step 3/"))

  written = _saved_weights(str(model_dir / "ckpt-2.h5"))
  expected = seen["weights at step 2"]
  assert expected.keys() <= written.keys()
  for key, value in expected.items():
    np.testing.assert_array_equal(written[key], value, err_msg=key)
  # Steps 3 and 4 changed them: the file holds the copy taken at step 2. ckpt-4 was
  # copied into the same host memory, once ckpt-2 was written.
  later = _saved_weights(str(model_dir / "ckpt-4.h5"))
  assert any(not np.array_equal(later[key], value) for key, value in expected.items())
  for key, value in trainer_helpers.weights_of(trainer.model).items():
    np.testing.assert_array_equal(later[key], value, err_msg=key)


def test_a_failed_background_write_is_raised_by_the_next_save_at_the_latest_naming_the_path(
    tmp_path, monkeypatch):
  write = portable.write

  def full_disk(path, content):
    if portable.step_of(path) == 2:
      raise OSError(28, "No space left on device")
    return write(path, content)

  monkeypatch.setattr(portable, "write", full_disk)
  model_dir = str(tmp_path / "run")
  trainer = Trainer(_experiment(), model_dir, log_fn=lambda _: None)
  with pytest.raises(checkpoint_errors.CheckpointWriteError) as raised:
    trainer.train()
  path = os.path.join(model_dir, "ckpt-2.h5")
  message = errors.user_message(raised.value)
  assert message.startswith(f"Writing checkpoint {path} failed: the disk is full (the "
                            "checkpoint needs ")
  assert message.endswith("no checkpoint of this run was committed")
  # Raised once the training thread is back from a loop to find it failed, at the save
  # of step 4 at the latest, before that one was started.
  assert 2 <= trainer.step <= 4
  assert portable.checkpoints_in(model_dir) == []


def test_a_checkpoint_committed_before_storage_failed_is_logged_and_named_to_resume_from(
    tmp_path, monkeypatch):
  """The write of ckpt-4 commits, then deleting ckpt-2 beyond max_to_keep fails: the
  log says ckpt-4 was saved before the one error line that names it to resume from."""
  delete_old = checkpointing.CheckpointSaver._delete_old

  def storage_gone(saver, keep=None):
    if saver.newest_committed and portable.step_of(saver.newest_committed) == 4:
      raise OSError(5, "Connection reset by peer")
    return delete_old(saver, keep)

  monkeypatch.setattr(checkpointing.CheckpointSaver, "_delete_old", storage_gone)
  model_dir = str(tmp_path / "run")
  experiment = _experiment(steps=8)
  experiment.trainer.max_to_keep = 1
  logged = []
  trainer = Trainer(experiment, model_dir, log_fn=logged.append)
  with pytest.raises(checkpoint_errors.CheckpointWriteError) as raised:
    trainer.train()
  newest = os.path.join(model_dir, "ckpt-4.h5")
  assert errors.user_message(raised.value).endswith(
      f"the newest committed checkpoint is {newest}: rerun the same command to resume "
      "from it")
  assert f"Saved checkpoint {newest}" in logged, logged
