"""Moving a portable checkpoint's arrays between memory and its HDF5 file, each with its
CRC32C (bert_tf.checkpoints.checksums); bert_tf.checkpoints.portable says what the file
holds.

The CRC32Cs lie together in one record, as TensorFlow's tensor bundle keeps them in
its index: one read at a restore, where an attribute on each array (version 3, still
read) costs some 20 us an array. The writer gives them to the file's manifest (version
5 on, bert_tf.checkpoints.manifest); version 4 kept them in a table of their own (the
root dataset TABLE: name, CRC32C), still read.

Arrays of LARGE_BYTES or more are stored contiguously (HDF5's default layout, their
space allocated when they are created) and moved through the file's own bytes with
os.pwrite and os.preadv in chunks of CHUNK_BYTES, which release the GIL (h5py holds it
while it reads or writes): the checksums' Follower takes each chunk's CRC on a thread of
its own while the next chunk moves, the chunk still in the cache. Smaller arrays, and
any array of another layout (a file not written here), go through h5py, their CRC taken
at once.
"""

import math
import os
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

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
# The root dataset of version 4 holding every array's CRC32C by name (a hard-linked
# array's under each of its names).
TABLE = "crc32c"
_TABLE_DTYPE = np.dtype([("name", h5py.string_dtype()), ("crc32c", np.uint32)])

Check = Callable[[], Tuple[int, int]]


# The most a filtered array's stored bytes may inflate to: DEFLATE's largest ratio,
# 1032:1 (gzip, HDF5's one compression filter that h5py always has).
_MAX_INFLATION = 1032


def _filtered(dataset: h5py.h5d.DatasetID) -> bool:
  """Whether the dataset's bytes pass through filters (compression, shuffle)."""
  return dataset.get_create_plist().get_nfilters() > 0


def _chunks(nbytes: int) -> range:
  return range(0, nbytes, CHUNK_BYTES)


def _raw(nbytes: int, dtype: np.dtype) -> bool:
  """Whether an array is moved through the file's bytes (those of memory and file alike)."""
  return nbytes >= LARGE_BYTES and dtype.kind in "fiu" and dtype.isnative


class Writer:
  """Writes arrays into an h5py.File being written at the local path `path`: `add` each
  (with its attributes) and `link` each shared one, then `finish` (which writes the
  large ones' bytes and gives every CRC32C) before the file is closed."""

  def __init__(self, f: h5py.File, path: str):
    self._file, self._path = f, path
    self._large: List[Tuple[str, h5py.Dataset, np.ndarray]] = []
    self._crcs: Dict[str, int] = {}

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

  def finish(self) -> Dict[str, int]:
    """Writes the large arrays' bytes at their datasets' offsets, their CRC32Cs taken
    beside; returns {name: CRC32C} of the arrays added (none without CHECKSUMS), which
    the file's manifest lists (bert_tf.checkpoints.manifest)."""
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
    return dict(self._crcs)


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


def _allocate(shape: Sequence[int], dtype, aligned: bool = False) -> np.ndarray:
  """An uninitialized array of `shape` and `dtype`, with `aligned` one whose data
  starts on a 64-byte boundary: the memory of every array a Reader reads."""
  if not aligned:
    return np.empty(shape, dtype)
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


def _table(f: h5py.File, file_size: int) -> Dict[str, int]:
  """{array name: CRC32C} of the file's TABLE (KeyError where it has none)."""
  if TABLE not in f:
    raise KeyError(f"no {TABLE} table")
  table = f[TABLE]
  if not (isinstance(table, h5py.Dataset) and table.dtype == _TABLE_DTYPE
          and table.ndim == 1 and table.size * table.dtype.itemsize <= file_size):
    raise ValueError(f"its {TABLE} table is no table of names and CRC32Cs within the file")
  return {name.decode() if isinstance(name, bytes) else name: int(crc)
          for name, crc in table[()]}


def _restored_dtype(dataset: h5py.h5d.DatasetID, stored: np.dtype, restore: str) -> np.dtype:
  """The dtype to read a dataset (stored as `stored`) as: ml_dtypes.bfloat16 for the
  uint16 arrays whose restored dtype (`restore`, else the `dtype` attribute) says
  bfloat16 (bert_tf.checkpoints.portable), else `stored`."""
  if stored == np.uint16 and (restore or h5py.Dataset(dataset).attrs.get("dtype")) == "bfloat16":
    import ml_dtypes  # pylint: disable=g-import-not-at-top
    return np.dtype(ml_dtypes.bfloat16)
  return stored


# Where a file's CRC32Cs lie (Reader's `crcs_in`): its manifest (version 5 on), its
# TABLE (version 4), an attribute of each array (version 3); None: nowhere (earlier).
IN_MANIFEST, IN_TABLE, IN_ATTRIBUTES = "manifest", "table", "attributes"


class OtherShapeError(ValueError):
  """An array whose declared shape differs from the one its reader expects (the
  model's): not damage, a checkpoint of another model."""


class Reader:
  """A context reading the datasets of an h5py.File open for reading from a local file,
  each with the check of its CRC32C: the metadata and the small arrays first (h5py,
  which holds the GIL), then the large arrays' bytes, the Follower taking their CRCs
  beside without waiting for the GIL.

  Nothing is allocated for an array before its declared shape and dtype are checked:
  against its manifest entry where the file has one, against the shape the caller
  expects where it knows one (the model's), and, all arrays together, against the
  file's size (a file cannot hold more bytes than it has), so that a damaged or
  crafted file costs no more memory than its size.
  """

  def __init__(self, f: h5py.File, crcs_in: Optional[str] = IN_TABLE,
               listed: Optional[Mapping[str, object]] = None,
               links: Optional[Mapping[str, str]] = None,
               expected: Optional[Mapping[str, Sequence[int]]] = None):
    """`crcs_in`: where the CRC32Cs lie (IN_MANIFEST, IN_TABLE, IN_ATTRIBUTES or None).
    `listed`: {name: manifest.Entry} of a file with a manifest, `links` its linked
    names ({name: the name stored}). `expected`: {name: shape} the caller knows."""
    self._file, self._crcs_in = f, crcs_in
    self._listed, self._links = listed, dict(links or {})
    self._expected = dict(expected or {})
    self._table: Optional[Dict[str, int]] = None
    self._descriptor: Optional[int] = None
    self._follower = checksums.Follower()
    self._left = 0  # the bytes the arrays read may still take: the file's size
    self.reading = ""  # the name being read, for error messages

  def __enter__(self) -> "Reader":
    self._descriptor = os.open(self._file.filename, os.O_RDONLY)
    self._left = os.fstat(self._descriptor).st_size
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
    (unless CHECKSUMS is off). In a file with a TABLE or a manifest, every array has
    its entry there.

    Raises:
      OSError, KeyError, ValueError, RuntimeError, TypeError: a damaged file (`reading`
        names the dataset).
    """
    arrays, checks, by_object, large = {}, {}, {}, []
    if CHECKSUMS and self._crcs_in == IN_TABLE and self._table is None:
      self.reading = TABLE
      self._table = _table(self._file, self._left)
    for name in names:
      if name == TABLE:
        continue
      if not isinstance(name, str):  # h5py's name of a link that is not UTF-8
        raise ValueError(f"the name {name!r} is not UTF-8 text")
      self.reading = name
      dataset = h5py.h5o.open(self._file.id, name.encode())
      if not isinstance(dataset, h5py.h5d.DatasetID):
        if self._listed is not None:  # its manifest lists it as an array
          raise ValueError(f"{name} is no array")
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
    """The CRC32C written for the dataset `name`: its manifest or TABLE entry (KeyError
    where there is none), else its attribute (version 3, KeyError without one), else
    None (ValueError where an earlier file's array carries one after all)."""
    if self._crcs_in == IN_MANIFEST:
      crc = self._listed[self._links.get(name, name)].crc32c
      if crc is None and CHECKSUMS:
        raise KeyError(f"its manifest lists no CRC32C for {name}")
      return crc if CHECKSUMS else None
    if not CHECKSUMS:
      return None
    if self._crcs_in == IN_TABLE:
      if name not in self._table:
        raise KeyError(f"{name} has no entry in the file's CRC32C table")
      return self._table[name]
    crc = _attribute_crc(dataset)
    if (crc is None) == (self._crcs_in == IN_ATTRIBUTES):
      raise (KeyError(f"{name} has no CRC32C attribute") if crc is None else
             ValueError(f"{name} carries a CRC32C, which its format version does not write"))
    return crc

  def _declared(self, dataset: h5py.h5d.DatasetID, name: str) -> Tuple[np.dtype, str]:
    """(stored dtype, restored dtype name or "") of a dataset, once its shape and dtype
    are checked against its manifest entry, the shape expected and, with those of the
    arrays before it, the file's size (ValueError naming what fails; OtherShapeError
    for a shape other than the one expected)."""
    stored, shape = dataset.dtype, tuple(dataset.shape)
    restore = ""
    if self._listed is not None:
      entry = self._listed.get(self._links.get(name, name))
      if entry is None:
        raise KeyError(f"its manifest does not list {name}")
      if (stored.str, shape) != (entry.dtype, tuple(entry.shape)):
        raise ValueError(f"{name} is {stored.str} {shape} in the file, {entry.dtype} "
                         f"{tuple(entry.shape)} in its manifest")
      restore = entry.restore
    if name in self._expected and tuple(self._expected[name]) != shape:
      raise OtherShapeError(f"{name}: shape {shape} in the checkpoint, "
                            f"{tuple(self._expected[name])} in the model")
    if stored.kind not in "biuf" or stored.itemsize > 16:
      raise ValueError(f"{name} is stored as {stored}, no type of a checkpoint's arrays")
    nbytes = math.prod(shape) * stored.itemsize
    # A filtered (compressed) array holds its stored bytes in the file, and inflates to
    # at most _MAX_INFLATION times them (DEFLATE's largest ratio).
    held = dataset.get_storage_size() if _filtered(dataset) else nbytes
    if held > self._left or nbytes > held * _MAX_INFLATION:
      raise ValueError(f"{name} declares shape {shape} of {stored} ({nbytes} bytes), "
                       "more than the file holds")
    self._left -= held
    return stored, restore

  def _start(self, dataset: h5py.h5d.DatasetID, name: str) -> tuple:
    """(array, check, offset, running): a small array read with its check (offset and
    running None); a large one's memory, its offset, and the Running its check waits
    for (None without a checksum), which _read_bytes feeds."""
    stored, restore = self._declared(dataset, name)
    crc_written = self._written_crc(dataset, name)
    dtype, offset = _restored_dtype(dataset, stored, restore), _offset(dataset, stored)
    if offset is not None:
      if crc_written is None:
        return _allocate(dataset.shape, dtype, aligned=True), None, offset, None
      running = checksums.Running()
      return (_allocate(dataset.shape, dtype, aligned=True),
              lambda: (running.value(), crc_written),
              offset, running)
    array = _allocate(dataset.shape, stored)
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
