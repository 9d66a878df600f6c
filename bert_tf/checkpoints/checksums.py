"""The CRC32C checksums of a portable checkpoint's arrays (bert_tf.checkpoints.portable:
one per array, as TensorFlow's tensor bundle stores one per tensor; where they lie in
the file: bert_tf.checkpoints.array_io).

A large array's CRC is taken by a `Follower`: a thread of its own that follows the array
chunk by chunk as bert_tf.checkpoints.array_io moves it between memory and the file, so
that each chunk is checked while the next one moves and while it is still in the cache.
The `crc32c` package's CRC releases the GIL for buffers of 32 KiB and more and works on
the array's own memory (no copy).
"""

import queue
import threading
from typing import Optional

import crc32c as crc32c_package
import numpy as np

# The attribute of each array that held the CRC32C of its bytes in format version 3.
CRC_ATTR = "crc32c"


def crc32c(array: np.ndarray) -> int:
  """The CRC32C of an array's bytes in C order (those h5py writes and reads)."""
  return crc32c_package.crc32c(np.ascontiguousarray(array).reshape([-1]).view(np.uint8))


class Running:
  """The CRC32C of one array's chunks, as far as the Follower has taken it."""

  def __init__(self):
    self.crc = 0
    self.error: Optional[BaseException] = None
    self._done = threading.Event()

  def value(self) -> int:
    """The CRC32C of all the array's chunks (waiting for the Follower to take it)."""
    self._done.wait()
    if self.error is not None:
      raise self.error
    return self.crc


class Follower:
  """A context in which a thread takes the CRC32C of the chunks handed to it, in order:
  `add` each chunk of an array with the array's Running (the chunks must not change
  until the Running gives its value), then `end` it. Leaving the context stops the
  thread."""

  def __init__(self):
    self._chunks: "queue.SimpleQueue" = queue.SimpleQueue()
    self._thread = threading.Thread(target=self._follow, name="crc32c", daemon=True)

  def __enter__(self) -> "Follower":
    self._thread.start()
    return self

  def __exit__(self, *error) -> None:
    self._chunks.put(None)
    self._thread.join()

  def add(self, running: Running, chunk: memoryview) -> None:
    self._chunks.put((running, chunk))

  def end(self, running: Running) -> Running:
    self._chunks.put((running, None))
    return running

  def _follow(self) -> None:
    while True:
      item = self._chunks.get()
      if item is None:
        return
      running, chunk = item
      if chunk is None:
        running._done.set()  # pylint: disable=protected-access
      elif running.error is None:
        try:
          running.crc = crc32c_package.crc32c(chunk, running.crc)
        except Exception as e:  # pylint: disable=broad-except
          running.error = e
