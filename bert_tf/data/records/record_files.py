"""TFRecord files read without TensorFlow: framing, checksums, compression, an index.

A TFRecord file is a sequence of records, each framed as
  uint64 length, uint32 masked CRC32C of the length, `length` bytes, uint32 masked CRC32C
of the bytes (little-endian). `RecordFile` indexes a file once (checking every length's
CRC) and reads any record by number (checking its data's CRC); a check that fails is a
`CorruptRecordError` naming the file and the byte offset, as TensorFlow's reader reports
it: the offset (in the uncompressed stream) of the part that failed, the record's length
header or its data 12 bytes further on, and of the record for one cut short (where
TensorFlow drops a file's last few bytes when too few for a header, this reader reports
them too). GZIP and ZLIB files (local or remote) are decompressed once, as
they stream in, into an unnamed temporary file; local uncompressed files are
memory-mapped; remote ones (gs://, s3://, ...) are read in place by ranged reads through
the package's file-system layer (tf.io.gfile with TensorFlow, fsspec without it; see
bert_tf.utils.range_reads), the blocks cached and shared by the files of one source.

`RecordSource` is a random-access source (len, [i]) over the records of many files, in
file order, as grain's MapDataset takes it. The checksums are the `crc32c` package's.
"""

import mmap
import struct
import tempfile
import zlib
from typing import Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence

import crc32c
import numpy as np

from bert_tf.utils import errors
from bert_tf.utils import files
from bert_tf.utils import range_reads

_HEADER = struct.Struct("<QI")
_CRC = struct.Struct("<I")
_HEADER_BYTES = 12
_FOOTER_BYTES = 4
_MASK_DELTA = 0xA282EAD8
_COPY_BLOCK = 16 << 20
COMPRESSION_TYPES = ("", "GZIP", "ZLIB")


class CorruptRecordError(errors.UserError, ValueError):
  """A TFRecord file whose framing or checksums do not hold; names the file and offset."""


def corrupt_records_error(bad: Mapping[str, str]) -> CorruptRecordError:
  """The error naming each corrupt file and where it breaks ({file: "byte offset N
  (corrupted record)"}, as `find_corrupt_records` gives)."""
  details = "; ".join(f"{path} at {problem}" for path, problem in bad.items())
  return CorruptRecordError(f"Corrupt TFRecord file(s): {details}")


def masked_crc32c(data: bytes) -> int:
  """The masked CRC32C TFRecord framing stores for `data`."""
  crc = crc32c.crc32c(data)
  return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _decompressor(compression_type: str):
  if compression_type == "GZIP":
    return zlib.decompressobj(16 + zlib.MAX_WBITS)
  return zlib.decompressobj(zlib.MAX_WBITS)


def _decompressed_copy(path: str, compression_type: str):
  """An unnamed temporary file holding the uncompressed stream of `path`."""
  out = tempfile.TemporaryFile()
  decompressor = _decompressor(compression_type) if compression_type else None
  with files.open_input(path) as f:
    try:
      while True:
        block = f.read(_COPY_BLOCK)
        if not block:
          break
        if decompressor is None:
          out.write(block)
          continue
        out.write(decompressor.decompress(block))
        # A GZIP file may hold several members, as `cat a.gz b.gz` makes.
        while decompressor.eof and decompressor.unused_data and compression_type == "GZIP":
          rest = decompressor.unused_data
          decompressor = _decompressor(compression_type)
          out.write(decompressor.decompress(rest))
    except zlib.error as e:
      out.close()
      _not_a_stream(path, compression_type, e)
  if decompressor is not None and not decompressor.eof:
    size = out.tell()
    out.close()
    raise CorruptRecordError(f"Corrupt TFRecord file(s): {path} at byte offset {size} "
                             f"(truncated {compression_type} stream)")
  return out


def _map(f) -> Optional[mmap.mmap]:
  f.seek(0, 2)
  if f.tell() == 0:
    return None
  return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def _check_header(data, offset: int, path: str) -> int:
  """The length of the record whose header starts at `offset` of `data` (the
  uncompressed stream, or its start), its CRC and the file's size checked."""
  if offset + _HEADER_BYTES > len(data):
    _fail(path, "truncated", offset)
  header = data[offset:offset + _HEADER_BYTES]
  length, length_crc = _HEADER.unpack(header)
  if masked_crc32c(header[:8]) != length_crc:
    _fail(path, "corrupted", offset)
  if offset + _HEADER_BYTES + length + _FOOTER_BYTES > len(data):
    _fail(path, "truncated", offset)
  return length


def _checked_data(data, offset: int, length: int, path: str) -> bytes:
  """The bytes of the record at `offset` of `data`, its data CRC checked."""
  start = offset + _HEADER_BYTES
  record = data[start:start + length]
  footer = data[start + length:start + length + _FOOTER_BYTES]
  if masked_crc32c(record) != _CRC.unpack(footer)[0]:
    _fail(path, "corrupted", start)
  return record


def _fail(path: str, kind: str, offset: int):
  raise corrupt_records_error({path: f"byte offset {offset} ({kind} record)"})


class RecordFile:
  """The records of one TFRecord file, indexed when it is opened.

  Args:
    path: a local or remote file.
    compression_type: "", "GZIP" or "ZLIB" (as data_config.compression_type).
    cache: the block cache a remote uncompressed file is read through (shared by the
      files of one RecordSource; a private one where None).

  Raises:
    CorruptRecordError: a length header whose CRC fails, or a file that ends inside a
      record, naming the file and the byte offset.
  """

  def __init__(self, path: str, compression_type: str = "",
               cache: Optional[range_reads.BlockCache] = None):
    _check_compression(compression_type)
    self.path = path
    self._file = None
    if compression_type:
      self._file = _decompressed_copy(path, compression_type)
      self._data = _map(self._file)
    elif files.is_local(path):
      with files.open_input(path) as f:
        self._data = _map(f)
    else:
      self._data = range_reads.RangeReader(path, cache)
    self._offsets = self._index()

  def _index(self) -> np.ndarray:
    """int64 [N + 1]: each record's offset, then the end of the last one."""
    data = self._data if self._data is not None else b""
    offsets: List[int] = []
    offset = 0
    while offset < len(data):
      offsets.append(offset)
      offset += _check_header(data, offset, self.path) + _HEADER_BYTES + _FOOTER_BYTES
    offsets.append(offset)
    return np.asarray(offsets, dtype=np.int64)

  def __len__(self) -> int:
    return len(self._offsets) - 1

  def offset(self, index: int) -> int:
    """The byte offset of record `index` (in the uncompressed stream)."""
    return int(self._offsets[index])

  def __getitem__(self, index: int) -> bytes:
    """Record `index`'s bytes, its data CRC checked."""
    offset = int(self._offsets[index])
    length = int(self._offsets[index + 1]) - offset - _HEADER_BYTES - _FOOTER_BYTES
    return _checked_data(self._data, offset, length, self.path)

  def __iter__(self) -> Iterator[bytes]:
    return (self[i] for i in range(len(self)))

  def close(self) -> None:
    if self._data is not None:
      self._data.close()
    if self._file is not None:
      self._file.close()


def read_first_record(path: str, compression_type: str = "") -> Optional[bytes]:
  """The first record of a TFRecord file, its CRCs checked, reading only the start of
  the file; None for an empty file.

  Raises:
    CorruptRecordError: naming the file and the byte offset.
  """
  _check_compression(compression_type)
  head = _stream_prefix(path, compression_type, _HEADER_BYTES)
  if not head:
    return None
  if len(head) < _HEADER_BYTES:
    _fail(path, "truncated", 0)
  length = _HEADER.unpack_from(head, 0)[0]
  whole = _stream_prefix(path, compression_type, _HEADER_BYTES + length + _FOOTER_BYTES)
  return _checked_data(whole, 0, _check_header(whole, 0, path), path)


def _stream_prefix(path: str, compression_type: str, size: int) -> bytes:
  """The first `size` bytes (fewer where the file ends first) of the uncompressed
  stream of `path`."""
  out = b""
  decompressor = _decompressor(compression_type) if compression_type else None
  with files.open_input(path) as f:
    while len(out) < size:
      block = f.read(min(_COPY_BLOCK, max(size - len(out), 1 << 16)))
      if not block:
        break
      try:
        out += decompressor.decompress(block) if decompressor else block
      except zlib.error as e:
        _not_a_stream(path, compression_type, e)
  return out[:size]


def _not_a_stream(path: str, compression_type: str, error: Exception):
  raise CorruptRecordError(f"Corrupt TFRecord file(s): {path} is not a valid "
                           f"{compression_type} stream ({error})") from None


def _check_compression(compression_type: str) -> None:
  if compression_type not in COMPRESSION_TYPES:
    raise ValueError(f"compression_type must be '', GZIP or ZLIB, got "
                     f"'{compression_type}'")


def check_records(path: str, compression_type: str = "") -> Optional[str]:
  """Reads every record of a TFRecord file with `RecordFile`, checking the CRCs.

  Returns:
    None when the whole file reads; else "byte offset N (corrupted record)" or
    "(truncated record)", the offset TensorFlow's record reader names.
  """
  try:
    records = RecordFile(path, compression_type)
    try:
      for _ in records:
        pass
    finally:
      records.close()
  except CorruptRecordError as e:
    return str(e).split(f"{path} at ", 1)[-1]
  return None


def find_corrupt_records(input_path: str, compression_type: str = "",
                         field: str = "input_path") -> Dict[str, str]:
  """{file: what `check_records` says} for every file of the comma-separated globs
  `input_path` that fails."""
  bad = {}
  for path in files.expand_patterns(input_path, field=field):
    problem = check_records(path, compression_type)
    if problem:
      bad[path] = problem
  return bad


def validate_record_files(input_path: str, compression_type: str = "",
                          field: str = "input_path") -> int:
  """Checks every record's CRCs in every file before any is used.

  Returns:
    the number of files checked.

  Raises:
    CorruptRecordError: naming each corrupt file and the byte offset it breaks at.
  """
  paths = files.expand_patterns(input_path, field=field)
  bad = find_corrupt_records(",".join(paths), compression_type, field)
  if bad:
    raise corrupt_records_error(bad)
  return len(paths)


class Record(NamedTuple):
  """One record's bytes and where it was read (for error messages)."""

  data: bytes
  path: str
  offset: int

  def where(self) -> str:
    return f"{self.path} at byte offset {self.offset}"


class RecordSource:
  """Random access to the records of TFRecord files, numbered over the files in order.

  Every file is indexed on construction (its length headers read and checked); a record
  is read, and its data CRC checked, when it is asked for. Thread-safe.

  Args:
    paths: the files, in the order their records are numbered.
    compression_type: "", "GZIP" or "ZLIB".
  """

  def __init__(self, paths: Sequence[str], compression_type: str = ""):
    self.paths = list(paths)
    cache = range_reads.BlockCache()
    self._files = [RecordFile(path, compression_type, cache) for path in self.paths]
    self._starts = np.cumsum([0] + [len(f) for f in self._files]).astype(np.int64)

  def __len__(self) -> int:
    return int(self._starts[-1])

  def row_counts(self) -> List[int]:
    """The records of each file, in file order."""
    return [len(f) for f in self._files]

  def __getitem__(self, index: int) -> Record:
    """Record `index` (0 <= index < len) with its file and byte offset."""
    index = int(index)
    if not 0 <= index < len(self):
      raise IndexError(f"record {index} of {len(self)}")
    which = int(np.searchsorted(self._starts, index, side="right")) - 1
    record_file = self._files[which]
    local = index - int(self._starts[which])
    return Record(record_file[local], record_file.path, record_file.offset(local))

  def __repr__(self) -> str:
    return f"RecordSource({len(self.paths)} file(s), {len(self)} records)"

  def close(self) -> None:
    for f in self._files:
      f.close()
