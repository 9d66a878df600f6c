"""Label names as a SavedModel asset, looked up by id inside the serving graph."""

import os
import tempfile

import tensorflow as tf

from bert_tf.utils import files

LABELS_ASSET = "labels.txt"


def write_label_file(label_names, directory=None):
  """Writes one label per line to a new `labels.txt`; returns its path.

  The file becomes a SavedModel asset (copied into the export's assets/), so it
  only needs to live until the export is written.
  """
  for name in label_names:
    if not name or "\n" in name or name != name.strip():
      raise ValueError(f"Label name {name!r} cannot be a line of {LABELS_ASSET}")
  directory = directory or tempfile.mkdtemp(prefix="bert_tf_labels_")
  return files.write_lines(os.path.join(directory, LABELS_ASSET), label_names)


class LabelTable(tf.Module):
  """id -> label name lookup backed by a `labels.txt` SavedModel asset."""

  def __init__(self, label_names, name="label_table"):
    super().__init__(name=name)
    self.label_names = tuple(label_names)
    with tf.init_scope():
      self.labels_asset = tf.saved_model.Asset(write_label_file(self.label_names))
      # From the names, not the asset file (see BertWordPieceTokenizer's tables).
      self._table = tf.lookup.StaticHashTable(
          tf.lookup.KeyValueTensorInitializer(
              tf.range(len(self.label_names), dtype=tf.int64),
              tf.constant(self.label_names, tf.string)),
          default_value="")

  def lookup(self, ids):
    """Integer ids (any shape) -> their names, tf.string of the same shape."""
    return self._table.lookup(tf.cast(ids, tf.int64))
