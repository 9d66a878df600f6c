"""The TensorFlow engine's input position (bert_tf.training.tf_engine.input): saved with
the layout its element numbers belong to, restored only into the same layout."""

import os

import tensorflow as tf

from bert_tf.training.tf_engine import input as input_lib


def _iterator_after(reads):
  iterator = iter(tf.data.Dataset.range(100))
  for _ in range(reads):
    next(iterator)
  return iterator


def test_a_position_resumes_only_into_the_layout_of_workers_and_replicas_it_was_saved_in(
    tmp_path):
  checkpoint = os.path.join(str(tmp_path), "ckpt-3.h5")
  input_lib.save_position(_iterator_after(3), checkpoint, process=1, layout=(2, 4))
  lines = []
  moved = _iterator_after(0)
  # Element n of a pipeline is another part of another global batch there.
  assert not input_lib.restore_position(moved, checkpoint, 1, (1, 4), log_fn=lines.append)
  assert int(next(moved)) == 0
  assert lines == [f"{input_lib.position_prefix(checkpoint, 1)} holds the input position "
                   "of 2 worker(s) with 4 replica(s) in all, this run has 1 with 4"]
  same = _iterator_after(0)
  assert input_lib.restore_position(same, checkpoint, 1, (2, 4))
  assert int(next(same)) == 3


def test_a_position_of_an_earlier_version_without_a_layout_still_resumes(tmp_path):
  checkpoint = os.path.join(str(tmp_path), "ckpt-5.h5")
  tf.train.Checkpoint(iterator=[_iterator_after(5)]).write(
      input_lib.position_prefix(checkpoint))
  resumed = _iterator_after(0)
  assert input_lib.restore_position(resumed, checkpoint)
  assert int(next(resumed)) == 5
