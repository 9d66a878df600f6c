"""TensorBoard scalars under model_dir/train and model_dir/eval.

Written with tf.summary.write and the scalars plugin's metadata, so that logging
needs no `tensorboard` package at training time (TensorBoard reads them as scalars).
"""

import os
from typing import Mapping

import tensorflow as tf
from tensorflow.core.framework import summary_pb2

_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))


class SummaryWriter:
  """Writes scalars for one phase ("train" or "eval"); a no-op off the chief."""

  def __init__(self, model_dir: str, phase: str, enabled: bool = True):
    self.directory = os.path.join(model_dir, phase)
    if enabled:
      self._writer = tf.summary.create_file_writer(self.directory)
    else:
      self._writer = tf.summary.create_noop_writer()

  def write(self, scalars: Mapping[str, float], step: int) -> None:
    """Writes each {name: value} as a float32 scalar at `step`, then flushes."""
    with self._writer.as_default(step=step):
      for name, value in scalars.items():
        tf.summary.write(name, tf.constant(float(value), tf.float32),
                         metadata=_SCALAR_METADATA)
    self._writer.flush()

  def close(self) -> None:
    self._writer.close()


def read_scalars(directory: str) -> dict:
  """{tag: [(step, value), ...]} from the event files in `directory` (for tests and
  scripts; needs no tensorboard package)."""
  out = {}
  for path in sorted(tf.io.gfile.glob(os.path.join(directory, "events.out.tfevents.*"))):
    for record in tf.data.TFRecordDataset(path):
      event = tf.compat.v1.Event.FromString(record.numpy())
      for value in event.summary.value:
        scalar = tf.make_ndarray(value.tensor) if value.HasField("tensor") else value.simple_value
        out.setdefault(value.tag, []).append((event.step, float(scalar)))
  return out
