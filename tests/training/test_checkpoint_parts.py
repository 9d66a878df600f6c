"""A checkpoint of several processes (bert_tf.training.checkpoint_parts): the chief commits
`ckpt-N.h5` only once every other process has marked its part complete (a marker that
verifies), and says which did not."""

import os
import time

import keras
import numpy as np
import pytest

from bert_tf.checkpoints import portable
from bert_tf.training import checkpoint_errors
from bert_tf.training import checkpoint_parts
from bert_tf.training import checkpointing
from bert_tf.training import engine as engine_lib
from bert_tf.training import process_group


class _Item:

  def __init__(self):
    self.variables = [keras.Variable(np.arange(4, dtype=np.float32), name="kernel")]


class _ChiefOfTwo:
  """The engine a CheckpointSaver sees on process 0 of 2 (no training, no input)."""

  placement = engine_lib.Placement(num_replicas=1, description="", process_index=0,
                                   process_count=2)
  processes = process_group.ProcessGroup()  # its barriers pass at once
  step = 1

  def __init__(self):
    item = _Item()
    self.model = type("Model", (), {"trained_items": {"encoder": item},
                                    "variables": item.variables})()

  def checkpoint_state(self):
    return {}


def test_the_chief_commits_a_checkpoint_only_once_the_other_process_marked_its_part(
    tmp_path):
  saver = checkpointing.CheckpointSaver(str(tmp_path), 2, _ChiefOfTwo())
  path = saver.save()
  time.sleep(0.3)
  assert saver.writing and not os.path.exists(path)
  marker = portable.input_prefix(path, 1) + checkpoint_parts.PART_DONE
  with open(marker, "w") as f:  # a marker cut short, or of another process: not its part
    f.write("1\n")
  time.sleep(0.3)
  assert saver.writing and not os.path.exists(path)
  with open(marker, "w") as f:
    f.write("\n".join(checkpoint_parts.part_marker_lines(1)) + "\n")
  saver.wait()
  assert portable.checkpoints_in(str(tmp_path)) == [path]


def test_a_part_that_never_comes_is_an_error_naming_the_process(tmp_path, monkeypatch):
  monkeypatch.setattr(checkpoint_parts, "PARTS_TIMEOUT_S", 0.3)
  saver = checkpointing.CheckpointSaver(str(tmp_path), 2, _ChiefOfTwo())
  path = saver.save()
  with pytest.raises(checkpoint_errors.CheckpointWriteError) as raised:
    saver.wait()
  assert str(raised.value) == (f"Checkpoint {path} is not committed: process(es) [1] did "
                               "not mark their part complete within 0 s")
  assert portable.checkpoints_in(str(tmp_path)) == []
