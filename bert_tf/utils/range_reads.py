"""Random access to a remote file by byte ranges, through a cache of fixed-size blocks.

A reader that wants any byte range of a file (a TFRecord file's records, read in the
order of a shuffle window) slices a `RangeReader` as it would a memory map: each slice
reads the blocks it needs with one ranged read each (a seek and a read on the file
object bert_tf.utils.file_systems opens, with no read-ahead of its own) and keeps them in
a `BlockCache` shared by the files of one input, so that reading the records of a window
in any order fetches each block once, and a pass in file order reads the file once.
"""

import collections
import itertools
import threading
from typing import Optional, Tuple

from bert_tf.utils import file_systems

# One ranged request per block: large enough that a request's latency is paid rarely,
# small enough that a record read out of order does not fetch much beside it.
BLOCK_BYTES = 1 << 20
# The blocks kept, over all the files of an input: a shuffle window of records
# (pretraining's 10000 rows of 512 tokens are about 50 MiB) is read from the cache.
CACHE_BYTES = 256 << 20
# Each reader's key in the caches: unique for the life of the process (an id() could
# be reused while a cache still holds the blocks of a reader gone).
_READER_NUMBERS = itertools.count()


class BlockCache:
  """The most recently read blocks of several files, up to `capacity` bytes. Thread-safe.

  Args:
    block_bytes: the size of every block (the last one of a file may be shorter);
      BLOCK_BYTES where None.
    capacity: the bytes kept, the least recently used blocks going first; CACHE_BYTES
      where None.
  """

  def __init__(self, block_bytes: Optional[int] = None, capacity: Optional[int] = None):
    self.block_bytes = block_bytes or BLOCK_BYTES
    self._capacity = max(capacity or CACHE_BYTES, self.block_bytes)
    self._blocks: "collections.OrderedDict[Tuple[int, int], bytes]" = collections.OrderedDict()
    self._held = 0
    self.lock = threading.Lock()

  def get(self, key: Tuple[int, int]):
    """The block at `key` (reader number, block number), or None; call with `lock`
    held."""
    block = self._blocks.get(key)
    if block is not None:
      self._blocks.move_to_end(key)
    return block

  def put(self, key: Tuple[int, int], block: bytes) -> None:
    """Keeps `block`, dropping the least recently used ones; call with `lock` held."""
    # Two threads may have read the same block: the second replaces the first.
    replaced = self._blocks.pop(key, None)
    self._held += len(block) - (len(replaced) if replaced is not None else 0)
    self._blocks[key] = block
    while self._held > self._capacity and len(self._blocks) > 1:
      _, dropped = self._blocks.popitem(last=False)
      self._held -= len(dropped)

  def forget(self, reader: int) -> None:
    """Drops every block of one reader."""
    with self.lock:
      for key in [key for key in self._blocks if key[0] == reader]:
        self._held -= len(self._blocks.pop(key))


class RangeReader:
  """The bytes of one file, read by slicing (`reader[a:b]`) and `len`. Thread-safe.

  Args:
    path: a remote file that bert_tf.utils.file_systems serves (a local one is
      memory-mapped instead, bert_tf.data.records.record_files).
    cache: the cache it shares with other readers (a private one where None).

  Raises:
    StorageError: a protocol that no installed library serves, naming the extra.
    OSError (or the file system's error): a file that cannot be opened.
  """

  def __init__(self, path: str, cache: Optional[BlockCache] = None):
    self.path = path
    self._cache = cache or BlockCache()
    storage = file_systems.for_path(path)
    self._size = storage.size(path)
    self._file = storage.open_ranges(path)
    self._file_lock = threading.Lock()
    self._number = next(_READER_NUMBERS)

  def __len__(self) -> int:
    return self._size

  def __getitem__(self, span: slice) -> bytes:
    """The bytes [span.start, span.stop) (clipped to the file, as slicing does)."""
    start, stop, _ = span.indices(self._size)
    if stop <= start:
      return b""
    size = self._cache.block_bytes
    first, last = start // size, (stop - 1) // size
    parts = [self._block(number) for number in range(first, last + 1)]
    joined = parts[0] if len(parts) == 1 else b"".join(parts)
    base = first * size
    return joined[start - base:stop - base]

  def _block(self, number: int) -> bytes:
    key = (self._number, number)
    with self._cache.lock:
      block = self._cache.get(key)
    if block is not None:
      return block
    with self._file_lock:
      self._file.seek(number * self._cache.block_bytes)
      block = self._read_fully(min(self._cache.block_bytes,
                                   self._size - number * self._cache.block_bytes))
    with self._cache.lock:
      self._cache.put(key, block)
    return block

  def _read_fully(self, count: int) -> bytes:
    parts, got = [], 0
    while got < count:
      part = self._file.read(count - got)
      if not part:
        raise EOFError(f"{self.path}: ended at byte {got} of a block of {count} "
                       "(the file changed while it was read)")
      parts.append(part)
      got += len(part)
    return b"".join(parts)

  def close(self) -> None:
    self._cache.forget(self._number)
    self._file.close()
