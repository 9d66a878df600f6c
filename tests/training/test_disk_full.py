"""A full disk (bert_tf.training.checkpointing): the failed save is one error saying how
much the checkpoint needed and naming trainer.max_to_keep and the checkpoint to resume
from; the earlier checkpoints stay whole; a rerun makes room by deleting the checkpoints
beyond max_to_keep before it writes, never the one it resumed from. The Trainer drives
the fake engine of test_trainer_with_fake_engine; the disk is a stub with room for two
checkpoints (beyond, the write fails with ENOSPC), and a real 1 MB tmpfs, filled to less
than a checkpoint's size (mounted by the test: where that is not allowed, not root, it
is skipped), which also holds no byte free: a rerun makes room before its first write."""

import errno
import os
import subprocess

import pytest

from bert_tf.checkpoints import portable
from bert_tf.training import checkpoint_errors

import test_trainer_with_fake_engine as fake


def _train(model_dir, steps, max_to_keep, through_run=False):
  """The console lines of a training run of the fake engine (`through_run`: as the tool
  runs it, Trainer.run, which writes params.yaml too)."""
  lines = []
  trainer, _ = fake._trainer(model_dir, steps_total=steps, log=lines,  # pylint: disable=protected-access
                             steps_per_loop=2, checkpoint_interval=2, log_interval=2,
                             summary_interval=2, max_to_keep=max_to_keep)
  if through_run:
    trainer.run("train", replace_params=True)
  else:
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
  with pytest.raises(checkpoint_errors.CheckpointWriteError) as failed:
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


@pytest.fixture(name="small_disk")
def _small_disk(tmp_path, monkeypatch):
  # Checkpoints of 128 KB, so that the few KB of the lock and TensorBoard's events files
  # are small beside them, as beside a real one.
  monkeypatch.setattr(fake.FakeModel, "WEIGHT_SIZE", 32 * 1024)
  directory = tmp_path / "disk"
  directory.mkdir()
  mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(directory)],
                           capture_output=True, text=True, check=False)
  if mounted.returncode != 0:
    pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
  try:
    yield str(directory)
  finally:
    # Lazily: a writer that failed on the full disk may still hold a file open.
    subprocess.run(["umount", "-l", str(directory)], check=True)


def _fill(directory, leave):
  """Fills `directory`'s file system but `leave` bytes."""
  free = os.statvfs(directory).f_bavail * os.statvfs(directory).f_frsize
  with open(os.path.join(directory, "filler"), "wb") as f:
    f.write(b"\0" * max(free - leave, 0))


def test_a_full_tmpfs_fails_in_one_line_and_a_rerun_makes_room(small_disk):
  model_dir = os.path.join(small_disk, "run")
  _train(model_dir, steps=4, max_to_keep=3)
  checkpoint_size = os.path.getsize(os.path.join(model_dir, "ckpt-4.h5"))
  _fill(small_disk, leave=checkpoint_size // 2)

  with pytest.raises(checkpoint_errors.CheckpointWriteError) as failed:
    _train(model_dir, steps=6, max_to_keep=3)
  message = str(failed.value)
  assert message.startswith(f"Writing checkpoint {model_dir}/ckpt-6.h5 failed: the disk is "
                            "full (the checkpoint needs "), message
  assert "trainer.max_to_keep=3" in message
  names = sorted(os.listdir(model_dir))
  assert not [name for name in names if ".tmp-" in name], names
  for path in portable.checkpoints_in(model_dir):
    portable.check_readable(path)
  assert [os.path.basename(p) for p in portable.checkpoints_in(model_dir)] == [
      "ckpt-4.h5", "ckpt-2.h5"]

  lines = _train(model_dir, steps=6, max_to_keep=2)
  assert f"Resumed from {model_dir}/ckpt-4.h5 at step 4" in lines
  assert [os.path.basename(p) for p in portable.checkpoints_in(model_dir)] == [
      "ckpt-6.h5", "ckpt-4.h5"]


def test_a_rerun_on_a_disk_with_no_byte_free_makes_room_before_it_writes(small_disk):
  # The lock, params.yaml and TensorBoard's events are written before the checkpoint:
  # the room is made before any of them.
  model_dir = os.path.join(small_disk, "run")
  _train(model_dir, steps=6, max_to_keep=3, through_run=True)
  _fill(small_disk, leave=0)
  assert os.statvfs(small_disk).f_bavail == 0

  lines = _train(model_dir, steps=8, max_to_keep=1, through_run=True)
  assert f"Resumed from {model_dir}/ckpt-6.h5 at step 6" in lines
  assert os.path.exists(os.path.join(model_dir, "params.yaml"))
  assert [os.path.basename(p) for p in portable.checkpoints_in(model_dir)] == ["ckpt-8.h5"]
