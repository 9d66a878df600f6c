"""The TensorFlow engine's input positions of earlier versions
(bert_tf.training.tf_engine.input): a tf.data iterator checkpoint beside `ckpt-N.h5`,
saved with the layout its element numbers belong to, restored only into the same
layout, and one that cannot be read is a line, not an error."""

import glob
import os

import tensorflow as tf

from bert_tf.training.tf_engine import input as input_lib


def _iterator_after(reads):
  iterator = iter(tf.data.Dataset.range(100))
  for _ in range(reads):
    next(iterator)
  return iterator


def _save_position(iterator, checkpoint, process=0, layout=None):
  """Writes an iterator's position beside `checkpoint` as earlier versions did."""
  saved = {"iterator": [iterator]}
  if layout is not None:
    saved["layout"] = tf.Variable(layout, dtype=tf.int64)
  tf.train.Checkpoint(**saved).write(input_lib.position_prefix(checkpoint, process))


def test_a_position_resumes_only_into_the_layout_of_workers_and_replicas_it_was_saved_in(
    tmp_path):
  checkpoint = os.path.join(str(tmp_path), "ckpt-3.h5")
  _save_position(_iterator_after(3), checkpoint, process=1, layout=(2, 4))
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
  _save_position(_iterator_after(5), checkpoint)
  resumed = _iterator_after(0)
  assert input_lib.restore_position(resumed, checkpoint)
  assert int(next(resumed)) == 5


def test_a_position_whose_data_file_was_deleted_is_one_line_not_an_error(tmp_path):
  checkpoint = os.path.join(str(tmp_path), "ckpt-5.h5")
  _save_position(_iterator_after(5), checkpoint, layout=(1, 1))
  prefix = input_lib.position_prefix(checkpoint)
  for data in glob.glob(prefix + ".data-*"):
    os.remove(data)
  lines = []
  resumed = _iterator_after(0)
  assert not input_lib.restore_position(resumed, checkpoint, log_fn=lines.append)
  assert len(lines) == 1 and lines[0].startswith(
      f"Cannot restore the input iterator from {prefix} (")
  assert int(next(resumed)) == 0
