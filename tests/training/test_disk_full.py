"""A full disk (bert_tf.training.checkpointing): the failed save is one error saying how
much the checkpoint needed and naming trainer.max_to_keep and the checkpoint to resume
from; the earlier checkpoints stay whole; a rerun makes room by deleting the checkpoints
beyond max_to_keep before it writes, never the one it resumed from. The Trainer drives
the fake engine of test_trainer_with_fake_engine; the disk is a stub with room for two
checkpoints (beyond, the write fails with ENOSPC). On a real tmpfs:
tests/integration/test_disk_full_tmpfs.py."""

import errno
import os

import pytest

from bert_tf.checkpoints import portable
from bert_tf.training import checkpointing

import test_trainer_with_fake_engine as fake


def _train(model_dir, steps, max_to_keep):
  lines = []
  trainer, _ = fake._trainer(model_dir, steps_total=steps, log=lines,  # pylint: disable=protected-access
                             steps_per_loop=2, checkpoint_interval=2, log_interval=2,
                             summary_interval=2, max_to_keep=max_to_keep)
  trainer.train()
  return lines


def _names(model_dir):
  return [os.path.basename(p) for p in portable.checkpoints_in(model_dir)]


def test_a_full_disk_names_the_size_and_max_to_keep_and_a_rerun_makes_room(
    tmp_path, monkeypatch):
  model_dir = str(tmp_path)
  _train(model_dir, steps=4, max_to_keep=3)
  assert _names(model_dir) == ["ckpt-4.h5", "ckpt-2.h5"]
  write = portable.write

  def write_where_two_checkpoints_fill_the_disk(path, content):
    if len(portable.checkpoints_in(os.path.dirname(path))) >= 2:
      raise OSError(errno.ENOSPC, "No space left on device", path)
    return write(path, content)

  monkeypatch.setattr(portable, "write", write_where_two_checkpoints_fill_the_disk)
  with pytest.raises(checkpointing.CheckpointWriteError) as failed:
    _train(model_dir, steps=6, max_to_keep=3)
  message = str(failed.value)
  assert message.startswith(f"Writing checkpoint {model_dir}/ckpt-6.h5 failed: the disk is "
                            "full (the checkpoint needs 0.0")
  assert " MB free): free space, or keep fewer checkpoints (trainer.max_to_keep=3;" in message
  assert message.endswith(f"the newest committed checkpoint is {model_dir}/ckpt-4.h5: rerun "
                          "the same command to resume from it")
  assert _names(model_dir) == ["ckpt-4.h5", "ckpt-2.h5"]
  for name in _names(model_dir):
    portable.check_readable(os.path.join(model_dir, name))

  # With max_to_keep=2 the oldest goes before the write: there is room.
  lines = _train(model_dir, steps=6, max_to_keep=2)
  assert f"Resumed from {model_dir}/ckpt-4.h5 at step 4" in lines
  assert _names(model_dir) == ["ckpt-6.h5", "ckpt-4.h5"]


def test_with_max_to_keep_1_the_checkpoint_resumed_from_is_kept_until_the_next_commits(
    tmp_path, monkeypatch):
  model_dir = str(tmp_path)
  _train(model_dir, steps=2, max_to_keep=1)
  seen = []
  write = portable.write

  def write_and_list(path, content):
    seen.append(_names(os.path.dirname(path)))
    return write(path, content)

  monkeypatch.setattr(portable, "write", write_and_list)
  _train(model_dir, steps=4, max_to_keep=1)
  assert seen == [["ckpt-2.h5"]]
  assert _names(model_dir) == ["ckpt-4.h5"]
