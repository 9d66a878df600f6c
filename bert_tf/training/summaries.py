"""TensorBoard scalars under model_dir/train and model_dir/eval, for every engine.

Written with the `tensorboard` package's event writer and protos (no TensorFlow): each
scalar is a float32 tensor summary with the scalars plugin's metadata, the form
`tf.summary.scalar` writes, so TensorBoard shows them as scalars. For a remote model_dir
the event file is written to a local folder and uploaded whole (bert_tf.utils.files)
after each flush: object stores cannot append, and TensorBoard's own writer without
TensorFlow appends through fsspec, which gcsfs turns into an overwrite by the last chunk.
Summaries are secondary: a write or upload that fails (a full disk, storage lost) is
one warning, after which the run's own checkpoint write reports the fault, and no
summary is written again.
"""

import glob
import logging
import os
import shutil
import tempfile
import time
from typing import Mapping

from tensorboard.backend.event_processing import event_file_loader
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.proto import summary_pb2
from tensorboard.compat.proto import tensor_pb2
from tensorboard.compat.proto import types_pb2
from tensorboard.summary.writer import event_file_writer
from tensorboard.util import tensor_util

from bert_tf.utils import storage_deadline
from bert_tf.utils import files

_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))


class SummaryWriter:
  """Writes scalars for one phase ("train" or "eval"); a no-op off the chief."""

  def __init__(self, model_dir: str, phase: str, enabled: bool = True):
    self.directory = os.path.join(model_dir, phase)
    self._writer = None
    self._local_directory = None
    if enabled:
      files.make_dirs(self.directory)
      if not files.is_local(self.directory):
        self._local_directory = tempfile.mkdtemp(prefix=f"bert_tf-{phase}-")
      try:
        self._writer = event_file_writer.EventFileWriter(
            self._local_directory or self.directory)
      except Exception as e:  # pylint: disable=broad-except
        self._give_up(e)

  def write(self, scalars: Mapping[str, float], step: int) -> None:
    """Writes each {name: value} as a float32 scalar at `step`, then flushes."""
    if self._writer is None:
      return
    values = [summary_pb2.Summary.Value(
        tag=name, metadata=_SCALAR_METADATA,
        tensor=tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[float(value)]))
              for name, value in scalars.items()]
    try:
      self._writer.add_event(event_pb2.Event(wall_time=time.time(), step=int(step),
                                             summary=summary_pb2.Summary(value=values)))
      self._writer.flush()
      self._upload()
    except Exception as e:  # pylint: disable=broad-except
      self._give_up(e)

  def _upload(self) -> None:
    if self._local_directory is None:
      return
    with storage_deadline.answer_within(storage_deadline.WRITE_BOUND_S):
      for name in os.listdir(self._local_directory):
        files.copy(os.path.join(self._local_directory, name),
                   os.path.join(self.directory, name))

  def _give_up(self, error: BaseException) -> None:
    """Warns once that summaries are no longer written, and writes none again."""
    logging.warning("TensorBoard summaries are no longer written to %s: %s",
                    self.directory, storage_deadline.failure_reason(error))
    self.close(failed=True)

  def close(self, failed: bool = False) -> None:
    if self._writer is not None:
      writer, self._writer = self._writer, None
      try:
        writer.close()
        if not failed:
          self._upload()
      except Exception as e:  # pylint: disable=broad-except
        if not failed:
          self._give_up(e)
      if self._local_directory is not None:
        shutil.rmtree(self._local_directory, ignore_errors=True)


def read_scalars(directory: str) -> dict:
  """{tag: [(step, value), ...]} from the event files in `directory` (for tests and
  scripts)."""
  out = {}
  for path in files.glob(os.path.join(glob.escape(directory), "events.out.tfevents.*")):
    for event in event_file_loader.EventFileLoader(path).Load():
      for value in event.summary.value:
        if value.HasField("tensor"):
          scalar = tensor_util.make_ndarray(value.tensor)
        else:
          scalar = value.simple_value
        out.setdefault(value.tag, []).append((event.step, float(scalar)))
  return out
