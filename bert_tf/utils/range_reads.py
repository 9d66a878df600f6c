"""Reading a remote file by byte ranges: random access through a cache of fixed-size
blocks, or the whole file fetched by large concurrent ranges into a local copy.

A reader that wants any byte range of a file (a TFRecord file's records, read in the
order of a shuffle window) slices a `RangeReader` as it would a memory map: each slice
reads the blocks it needs with one ranged read each (a seek and a read on the file
object bert_tf.utils.file_systems opens, with no read-ahead of its own) and keeps them in
a `BlockCache` shared by the files of one input, so that reading the records of a window
in any order fetches each block once, and a pass in file order reads the file once.

A reader that reads most of a file in small pieces (h5py reading a checkpoint: a
header, an object header and an array at a time, about 1,500 pieces for BERT-tiny with
its optimizer state) reads it from `local_copy` instead: the file fetched whole in
FETCH_BYTES ranges, FETCH_WORKERS at a time, into a local temporary file that it then
parses at the local disk's pace. A restore opens its checkpoint several times (the check
that it reads in full, the items, the optimizer state): the copy is kept while it is the
last remote file read and unchanged (same size and version), so those reads fetch it
once.
"""

import atexit
import collections
import concurrent.futures
import itertools
import os
import tempfile
import threading
from typing import List, Optional, Tuple

from bert_tf.utils import files

# One ranged request per block: large enough that a request's latency is paid rarely,
# small enough that a record read out of order does not fetch much beside it.
BLOCK_BYTES = 1 << 20
# The blocks kept, over all the files of an input: a shuffle window of records
# (pretraining's 10000 rows of 512 tokens are about 50 MiB) is read from the cache.
CACHE_BYTES = 256 << 20
# A whole file is fetched in ranges of FETCH_BYTES, FETCH_WORKERS at a time: a request's
# latency (tens of milliseconds on a bucket) is paid once per 8 MiB, and several
# requests in flight keep the link busy while each waits for its first byte.
FETCH_BYTES = 8 << 20
FETCH_WORKERS = 8
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
    storage = files.file_system(path)
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


def fetch_plan(size: int, piece: Optional[int] = None,
               workers: Optional[int] = None) -> List[List[Tuple[int, int]]]:
  """How a file of `size` bytes is fetched: the ranges [start, stop) of at most `piece`
  bytes (FETCH_BYTES where None) that cover it, in at most `workers` (FETCH_WORKERS)
  runs of consecutive ranges (one per worker, read in order through one file object, so
  that a library's own read-ahead serves the next range rather than fetching it again)."""
  piece, workers = piece or FETCH_BYTES, workers or FETCH_WORKERS
  ranges = [(start, min(start + piece, size)) for start in range(0, size, piece)]
  if not ranges:
    return []
  per_worker = -(-len(ranges) // workers)
  return [ranges[i:i + per_worker] for i in range(0, len(ranges), per_worker)]


def fetch(path: str, target: str, size: Optional[int] = None) -> int:
  """Writes the remote file at `path` to the local file `target` (created or replaced)
  by fetch_plan's ranges, FETCH_WORKERS runs at a time; returns its size.

  Raises:
    StorageError: a protocol that no installed library serves, naming the extra.
    EOFError: the file was shorter than `size` (it changed while it was read).
    OSError (or the file system's error): the file cannot be read, or `target` written.
  """
  storage = files.file_system(path)
  size = storage.size(path) if size is None else size
  plan = fetch_plan(size)
  descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
  try:
    os.ftruncate(descriptor, size)

    def run(ranges: List[Tuple[int, int]]) -> None:
      for (start, stop), data in zip(ranges, storage.read_ranges(path, ranges)):
        if len(data) != stop - start:
          raise EOFError(f"{path}: {len(data)} bytes at {start} where {stop - start} "
                         f"were asked for (the file changed while it was read)")
        files.write_at(descriptor, memoryview(data), start)

    if plan:
      with concurrent.futures.ThreadPoolExecutor(len(plan)) as pool:
        for done in [pool.submit(run, ranges) for ranges in plan]:
          done.result()
  finally:
    os.close(descriptor)
  return size


class _LocalCopy:
  """The local copy of the last remote file read whole: its path, the remote file's
  (size, version) when fetched, and the local file."""

  lock = threading.Lock()
  held: Optional[Tuple[str, Tuple[int, str], str]] = None


def local_copy(path: str) -> str:
  """A local file holding the remote file at `path`, fetched whole (see `fetch`), for a
  library that reads a file in many small pieces (h5py). The copy is kept while `path`
  is the last remote file read this way and its size and version stay the same (where
  its storage tells a version), so reading it again costs one metadata request; it is
  deleted when another file is read this way, by `release_local_copy`, or at exit. A
  caller reads it before asking for another (an open file outlives the deletion).

  Raises:
    as `fetch`.
  """
  storage = files.file_system(path)
  size, version = storage.size_and_version(path)
  with _LocalCopy.lock:
    held = _LocalCopy.held
    if held and held[0] == path and held[1] == (size, version) and version:
      return held[2]
    _release()
    handle, local = tempfile.mkstemp(prefix="bert_tf-", suffix="-" + os.path.basename(path))
    os.close(handle)
    try:
      fetch(path, local, size)
    except BaseException:
      os.remove(local)
      raise
    _LocalCopy.held = (path, (size, version), local)
    return local


def release_local_copy() -> None:
  """Deletes the local copy `local_copy` keeps, if any (a run calls it once its state is
  restored: a checkpoint's copy is not needed again)."""
  with _LocalCopy.lock:
    _release()


def _release() -> None:
  held, _LocalCopy.held = _LocalCopy.held, None
  if held and os.path.exists(held[2]):
    os.remove(held[2])


atexit.register(release_local_copy)
