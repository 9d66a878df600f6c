"""The CRC32C checksums of a portable checkpoint's arrays (bert_tf.checkpoints.portable:
attribute CRC_ATTR of each dataset, as TensorFlow's tensor bundle stores one per
tensor), computed on a thread of their own while h5py writes or reads the arrays.

h5py holds the GIL while it writes or reads, so the thread runs beside it only with a
CRC that releases the GIL: the `crc32c` package's does for buffers of 32 KiB and more,
on the array's own memory (google-crc32c's releases it only for `bytes`, which would
cost a copy of every array).
"""

import concurrent.futures
from typing import Callable, Optional

import crc32c as crc32c_package
import numpy as np

# The attribute of each array holding the CRC32C of its bytes (format version 3).
CRC_ATTR = "crc32c"
# Smaller arrays are checked on the calling thread: handing one to the thread costs
# more than its CRC.
_THREAD_BYTES = 1 << 20


def crc32c(array: np.ndarray) -> int:
  """The CRC32C of an array's bytes in C order (those h5py writes and reads)."""
  return crc32c_package.crc32c(np.ascontiguousarray(array).reshape([-1]).view(np.uint8))


class _Batch:
  """Arrays whose CRC32Cs the thread computes in one task, and that task."""

  def __init__(self):
    self.arrays, self.bytes, self.future = [], 0, None


class Background:
  """A context in which `start` computes CRC32Cs on one thread beside the caller's
  work (arrays of 1 MiB or more, where a GIL-free CRC is installed), the caller asking
  for each value when it needs it. Leaving the context waits for the thread.

  The arrays go to the thread in batches of about BATCH_BYTES: each hand-over of the GIL
  between the two threads waits for the scheduler, milliseconds on a loaded machine."""

  BATCH_BYTES = 64 << 20

  def __init__(self):
    self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
    self._open = _Batch()

  def __enter__(self) -> "Background":
    self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="crc32c")
    return self

  def __exit__(self, *error) -> None:
    self._pool.shutdown(wait=True, cancel_futures=True)

  def start(self, array: np.ndarray) -> Callable[[], int]:
    """Starts the CRC32C of `array` (which must not change until it is asked for);
    returns the function that gives it (waiting for it)."""
    if array.nbytes < _THREAD_BYTES:
      value = crc32c(array)
      return lambda: value
    batch, index = self._open, len(self._open.arrays)
    batch.arrays.append(array)
    batch.bytes += array.nbytes
    if batch.bytes >= self.BATCH_BYTES:
      self._submit()
    return lambda: self._result(batch, index)

  def _submit(self) -> None:
    batch, self._open = self._open, _Batch()
    batch.future = self._pool.submit(lambda: [crc32c(array) for array in batch.arrays])

  def _result(self, batch: _Batch, index: int) -> int:
    if batch.future is None:  # the batch still being filled: it goes now
      self._submit()
    return batch.future.result()[index]
