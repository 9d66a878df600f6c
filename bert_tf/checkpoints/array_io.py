"""Moving a portable checkpoint's arrays between memory and its HDF5 file, each with its
CRC32C (bert_tf.checkpoints.checksums); bert_tf.checkpoints.portable says what the file
holds.

The CRC32Cs lie together in one table (the root dataset TABLE: name, CRC32C), as
TensorFlow's tensor bundle keeps them in its index: one read at a restore, where an
attribute on each array (version 3, still read) costs some 20 us an array.

Arrays of LARGE_BYTES or more are stored contiguously (HDF5's default layout, their
space allocated when they are created) and moved through the file's own bytes with
os.pwrite and os.preadv in chunks of CHUNK_BYTES, which release the GIL (h5py holds it
while it reads or writes): the checksums' Follower takes each chunk's CRC on a thread of
its own while the next chunk moves, the chunk still in the cache. Smaller arrays, and
any array of another layout (a file not written here), go through h5py, their CRC taken
at once.
"""

import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import h5py
import numpy as np

from bert_tf.checkpoints import checksums
from bert_tf.utils import files

# Arrays at least this large are moved through the file's bytes, and read into memory
# that starts on a 64-byte boundary (as TensorFlow's kernels need of memory a tensor
# shares, bert_tf.checkpoints.portable_restore).
LARGE_BYTES = 1 << 20
# What one system call moves: small enough to be still in the last-level cache when the
# CRC thread reads it, large enough that the hand-overs cost nothing.
CHUNK_BYTES = 8 << 20
# False only where the checksums' cost is measured (bench.checkpoint_io): arrays are
# then written without, and read without checking, a CRC32C.
CHECKSUMS = True
# The root dataset holding every array's CRC32C by name (a hard-linked array's under
# each of its names).
TABLE = "crc32c"
_TABLE_DTYPE = np.dtype([("name", h5py.string_dtype()), ("crc32c", np.uint32)])

Check = Callable[[], Tuple[int, int]]


def _chunks(nbytes: int) -> range:
  return range(0, nbytes, CHUNK_BYTES)


def _raw(nbytes: int, dtype: np.dtype) -> bool:
  """Whether an array is moved through the file's bytes (those of memory and file alike)."""
  return nbytes >= LARGE_BYTES and dtype.kind in "fiu" and dtype.isnative


class Writer:
  """Writes arrays into an h5py.File being written at the local path `path`: `add` each
  (with its attributes) and `link` each shared one, then `finish` (which writes the
  large ones' bytes and the CRC32C table) before the file is closed."""

  def __init__(self, f: h5py.File, path: str):
    self._file, self._path = f, path
    self._large: List[Tuple[str, h5py.Dataset, np.ndarray]] = []
    self._crcs: Dict[str, int] = {}
    self._links: List[Tuple[str, str]] = []

  def add(self, name: str, array: np.ndarray, attrs: Dict[str, object]) -> None:
    """Creates dataset `name` holding `array` (C order), with attributes `attrs`."""
    array = np.asarray(array, order="C")
    if not _raw(array.nbytes, array.dtype):
      dataset = self._file.create_dataset(name, data=array)
      if CHECKSUMS:
        self._crcs[name] = checksums.crc32c(array)
    else:
      dataset = self._create_allocated(name, array)
      self._large.append((name, dataset, array))
    dataset.attrs.update(attrs)

  def link(self, name: str, target: str) -> None:
    """Makes `name` a hard link to the array `target` (added before)."""
    self._file[name] = self._file[target]
    self._links.append((name, target))

  def _create_allocated(self, name: str, array: np.ndarray) -> h5py.Dataset:
    """An empty contiguous dataset of `array`'s shape and type, its space allocated in
    the file now and never filled (the array's bytes are written into it)."""
    creation = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    creation.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    creation.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    creation.set_obj_track_times(False)  # no modification time: equal contents, equal bytes
    link = h5py.h5p.create(h5py.h5p.LINK_CREATE)
    link.set_create_intermediate_group(True)
    dataset_id = h5py.h5d.create(self._file.id, name.encode(), h5py.h5t.py_create(array.dtype),
                                 h5py.h5s.create_simple(array.shape), dcpl=creation,
                                 lcpl=link)
    return h5py.Dataset(dataset_id)

  def finish(self) -> None:
    """Writes the large arrays' bytes at their datasets' offsets, their CRC32Cs taken
    beside, and the table of every CRC32C."""
    self._file.flush()
    descriptor = os.open(self._path, os.O_WRONLY)
    try:
      with checksums.Follower() as follower:
        crcs = []
        for name, dataset, array in self._large:
          running = checksums.Running() if CHECKSUMS else None
          data = memoryview(array.reshape([-1]).view(np.uint8))
          offset = dataset.id.get_offset()
          for start in _chunks(array.nbytes):
            chunk = data[start:start + CHUNK_BYTES]
            if running is not None:
              follower.add(running, chunk)
            files.write_at(descriptor, chunk, offset + start)
          if running is not None:
            crcs.append((name, follower.end(running)))
        for name, running in crcs:
          self._crcs[name] = running.value()
    finally:
      os.close(descriptor)
    if CHECKSUMS:
      self._crcs.update((name, self._crcs[target]) for name, target in self._links)
      self._file.create_dataset(TABLE, data=np.array(sorted(self._crcs.items()), _TABLE_DTYPE))


def _offset(dataset: h5py.h5d.DatasetID, dtype: np.dtype) -> Optional[int]:
  """The file offset of a dataset's bytes (stored as `dtype`) where they lie there as in
  memory (contiguous, allocated, no external file, native byte order), else None."""
  nbytes = int(np.prod(dataset.shape, dtype=np.int64)) * dtype.itemsize
  if not (_raw(nbytes, dtype) and hasattr(os, "preadv")):
    return None
  creation = dataset.get_create_plist()
  if creation.get_layout() != h5py.h5d.CONTIGUOUS or creation.get_external_count():
    return None
  return dataset.get_offset()


def _aligned_empty(shape: Sequence[int], dtype) -> np.ndarray:
  """An uninitialized array whose data starts on a 64-byte boundary."""
  size = int(np.prod(shape)) * np.dtype(dtype).itemsize
  raw = np.empty(size + 64, np.uint8)
  start = -raw.ctypes.data % 64
  return raw[start:start + size].view(dtype).reshape(shape)


_UINT32 = h5py.h5t.py_create(np.dtype(np.uint32))


def _attribute_crc(dataset: h5py.h5d.DatasetID) -> Optional[int]:
  """The CRC32C attribute of a dataset (version 3), or None, through h5py's low-level
  calls (a tenth of the time of `attrs.get`)."""
  try:
    attribute = h5py.h5a.open(dataset, checksums.CRC_ATTR.encode())
  except KeyError:
    return None
  value = np.empty((), np.uint32)
  attribute.read(value, mtype=_UINT32)
  return int(value)


def _table(f: h5py.File) -> Dict[str, int]:
  """{array name: CRC32C} of the file's TABLE (KeyError where it has none)."""
  if TABLE not in f:
    raise KeyError(f"no {TABLE} table")
  return {name.decode() if isinstance(name, bytes) else name: int(crc)
          for name, crc in f[TABLE][()]}


def _restored_dtype(dataset: h5py.h5d.DatasetID, stored: np.dtype) -> np.dtype:
  """The dtype to read a dataset (stored as `stored`) as: ml_dtypes.bfloat16 for the
  uint16 arrays whose `dtype` attribute says bfloat16 (bert_tf.checkpoints.portable),
  else `stored`."""
  if stored == np.uint16 and h5py.Dataset(dataset).attrs.get("dtype") == "bfloat16":
    import ml_dtypes  # pylint: disable=g-import-not-at-top
    return np.dtype(ml_dtypes.bfloat16)
  return stored


class Reader:
  """A context reading the datasets of an h5py.File open for reading from a local file,
  each with the check of its CRC32C: the metadata and the small arrays first (h5py,
  which holds the GIL), then the large arrays' bytes, the Follower taking their CRCs
  beside without waiting for the GIL."""

  def __init__(self, f: h5py.File, has_table: bool = True):
    """`has_table`: the file keeps its CRC32Cs in TABLE (else in attributes, version 3,
    or none)."""
    self._file, self._has_table = f, has_table
    self._table: Optional[Dict[str, int]] = None
    self._descriptor: Optional[int] = None
    self._follower = checksums.Follower()
    self.reading = ""  # the name being read, for error messages

  def __enter__(self) -> "Reader":
    self._descriptor = os.open(self._file.filename, os.O_RDONLY)
    self._follower.__enter__()
    return self

  def __exit__(self, *error) -> None:
    self._follower.__exit__(*error)
    os.close(self._descriptor)

  def read(self, names: Sequence[str]) -> Tuple[Dict[str, np.ndarray], Dict[str, Check]]:
    """({name: array}, {name: check}) of the datasets among `names` (groups and the
    TABLE skipped),
    a hard-linked dataset read once, its array under each of its names; a check
    returns (CRC32C of the bytes read, CRC32C written), for the arrays that carry one
    (unless CHECKSUMS is off). In a file with a TABLE, every array has its entry there.

    Raises:
      OSError, KeyError, ValueError, RuntimeError: a damaged file (`reading` names the
        dataset).
    """
    arrays, checks, by_object, large = {}, {}, {}, []
    if CHECKSUMS and self._has_table and self._table is None:
      self.reading = TABLE
      self._table = _table(self._file)
    for name in names:
      if name == TABLE:
        continue
      self.reading = name
      dataset = h5py.h5o.open(self._file.id, name.encode())
      if not isinstance(dataset, h5py.h5d.DatasetID):
        continue
      if dataset not in by_object:
        by_object[dataset], check, offset, running = self._start(dataset, name)
        if check is not None:
          checks[name] = check
        if offset is not None:
          large.append((name, by_object[dataset], offset, running))
      arrays[name] = by_object[dataset]
    for name, array, offset, running in large:
      self.reading = name
      self._read_bytes(name, array, offset, running)
    return arrays, checks

  def _written_crc(self, dataset: h5py.h5d.DatasetID, name: str) -> Optional[int]:
    """The CRC32C written for the dataset `name`: its TABLE entry (KeyError where the
    table has none), else its attribute (version 3), else None."""
    if not CHECKSUMS:
      return None
    if self._table is None:
      return _attribute_crc(dataset)
    if name not in self._table:
      raise KeyError(f"{name} has no entry in the file's CRC32C table")
    return self._table[name]

  def _start(self, dataset: h5py.h5d.DatasetID, name: str) -> tuple:
    """(array, check, offset, running): a small array read with its check (offset and
    running None); a large one's memory, its offset, and the Running its check waits
    for (None without a checksum), which _read_bytes feeds."""
    crc_written = self._written_crc(dataset, name)
    stored = dataset.dtype
    dtype, offset = _restored_dtype(dataset, stored), _offset(dataset, stored)
    if offset is not None:
      if crc_written is None:
        return _aligned_empty(dataset.shape, dtype), None, offset, None
      running = checksums.Running()
      return (_aligned_empty(dataset.shape, dtype), lambda: (running.value(), crc_written),
              offset, running)
    array = np.empty(dataset.shape, stored)
    if array.size:
      dataset.read(h5py.h5s.ALL, h5py.h5s.ALL, array)
    if crc_written is None:
      return array.view(dtype), None, None, None
    crc = checksums.crc32c(array)
    return array.view(dtype), lambda: (crc, crc_written), None, None

  def _read_bytes(self, name: str, array: np.ndarray, offset: int,
                  running: Optional[checksums.Running]) -> None:
    """Reads a large array's bytes from `offset`, handing each chunk to the Follower
    where `running` takes its CRC32C."""
    data = memoryview(array.reshape([-1]).view(np.uint8))
    for start in _chunks(array.nbytes):
      chunk = data[start:start + CHUNK_BYTES]
      if os.preadv(self._descriptor, [chunk], offset + start) != len(chunk):
        raise OSError(f"the file ends inside {name}")
      if running is not None:
        self._follower.add(running, chunk)
    if running is not None:
      self._follower.end(running)
