"""What a portable checkpoint (bert_tf.checkpoints.portable) says about itself, checked
before any of it is acted on.

From format version 5 on, a file holds its manifest: one record of everything its
reader acts on (the attributes: format, version, writing backend; each array's name,
stored dtype, shape, restored dtype and CRC32C; the names hard-linked to another
array), as canonical JSON (sorted keys, no spaces: the same content gives the same
bytes) in the root dataset MANIFEST, with the CRC32C of those bytes in the root
attribute MANIFEST_CRC. Every later version keeps both where they are, so that the
version is read checked: a flipped bit in it is damage, never the claim of a newer
bert_tf.

Files of versions 1 to 4 have no manifest: their version attribute is checked against
what the file holds (a CRC32C table in version 4 alone; a CRC32C attribute on each
array in version 3 alone, bert_tf.checkpoints.array_io), so that a flipped bit in it
is damage too.
"""

import dataclasses
import json
from typing import Dict, Mapping, Optional, Tuple

import h5py
import numpy as np

from bert_tf.checkpoints import array_io
from bert_tf.checkpoints import checksums

MANIFEST = "manifest"
MANIFEST_CRC = "manifest_crc32c"
# The first format version with a manifest; versions before it are checked by
# `_unlisted_version`.
FIRST_LISTED = 5


class NotPortableError(ValueError):
  """A file whose format attribute is not a portable checkpoint's (and no manifest)."""


@dataclasses.dataclass(frozen=True)
class Entry:
  """One array of a manifest: its stored dtype (NumPy's `dtype.str`, e.g. '<f4'), shape,
  restored dtype name ('bfloat16' for arrays stored as uint16) and CRC32C (None where
  written without checksums, bench.checkpoint_io)."""

  dtype: str
  shape: Tuple[int, ...]
  restore: str
  crc32c: Optional[int]


@dataclasses.dataclass
class Header:
  """What a file says about itself, checked.

  Attributes:
    version: its format version.
    attrs: its attributes (format, version, backend; `step` in version 2).
    arrays: {name: Entry} of every array stored (None before version 5).
    links: {name: the name it is stored under} of the hard-linked arrays.
  """

  version: int
  attrs: Dict[str, object]
  arrays: Optional[Dict[str, Entry]] = None
  links: Dict[str, str] = dataclasses.field(default_factory=dict)

  @property
  def crcs_in(self) -> Optional[str]:
    """Where its arrays' CRC32Cs lie, as array_io.Reader takes it."""
    if self.arrays is not None:
      return array_io.IN_MANIFEST
    return {4: array_io.IN_TABLE, 3: array_io.IN_ATTRIBUTES}.get(self.version)


def _plain(value):
  return value.item() if isinstance(value, np.generic) else value


def encode(attrs: Mapping[str, object], arrays: Mapping[str, Entry],
           links: Mapping[str, str]) -> bytes:
  """The manifest's bytes: canonical JSON of `attrs`, `arrays` and `links`."""
  record = {"attrs": {key: _plain(value) for key, value in attrs.items()},
            "arrays": {name: dataclasses.asdict(entry) for name, entry in arrays.items()},
            "links": dict(links)}
  return json.dumps(record, sort_keys=True, separators=(",", ":")).encode("ascii")


def write(f: h5py.File, attrs: Mapping[str, object], arrays: Mapping[str, Entry],
          links: Mapping[str, str]) -> None:
  """Writes the manifest and its CRC32C into `f`, open for writing."""
  data = np.frombuffer(encode(attrs, arrays, links), np.uint8)
  f.create_dataset(MANIFEST, data=data)
  f.attrs[MANIFEST_CRC] = np.uint32(checksums.crc32c(data))


def _entry(name: str, value) -> Entry:
  if not (isinstance(value, dict) and set(value) == {"dtype", "shape", "restore", "crc32c"}
          and isinstance(value["dtype"], str) and isinstance(value["restore"], str)
          and isinstance(value["shape"], list)
          and all(isinstance(d, int) and d >= 0 for d in value["shape"])
          and (value["crc32c"] is None or isinstance(value["crc32c"], int))):
    raise ValueError(f"its manifest's entry for {name} is malformed")
  return Entry(value["dtype"], tuple(value["shape"]), value["restore"], value["crc32c"])


def _listed(f: h5py.File, file_size: int) -> Header:
  """The Header of a file with a manifest (ValueError where it fails its checksum or
  is malformed)."""
  if not (MANIFEST_CRC in f.attrs and MANIFEST in f):
    raise ValueError("it lacks its manifest or the manifest's CRC32C")
  dataset = f[MANIFEST]
  if not (isinstance(dataset, h5py.Dataset) and dataset.dtype == np.uint8
          and dataset.ndim == 1 and dataset.size <= file_size):
    raise ValueError("its manifest is no byte string within the file")
  data = dataset[()]
  written = f.attrs[MANIFEST_CRC]
  if not isinstance(written, np.integer):
    raise ValueError("its manifest's CRC32C is no integer")
  read = checksums.crc32c(data)
  if read != int(written):
    raise ValueError(f"its manifest fails its checksum (CRC32C {read:08x} read, "
                     f"{int(written):08x} written)")
  try:
    record = json.loads(data.tobytes().decode("ascii"))
  except (UnicodeDecodeError, json.JSONDecodeError):
    record = None
  if not (isinstance(record, dict) and set(record) == {"attrs", "arrays", "links"}
          and all(isinstance(record[key], dict) for key in record)
          and isinstance(record["attrs"].get("version"), int)
          and all(isinstance(k, str) and isinstance(v, str)
                  for k, v in record["links"].items())):
    raise ValueError("its manifest is malformed")
  arrays = {name: _entry(name, value) for name, value in record["arrays"].items()}
  if not set(record["links"].values()) <= set(arrays):
    raise ValueError("its manifest links a name to an array it does not list")
  return Header(record["attrs"]["version"], record["attrs"], arrays, record["links"])


def _unlisted_version(f: h5py.File) -> int:
  """The version of a file without a manifest, checked against what the file holds."""
  version = f.attrs.get("version", 1)
  if not isinstance(version, (int, np.integer)) or version < 1:
    raise ValueError(f"its version attribute {version!r} is no format version")
  version = int(version)
  if version >= FIRST_LISTED:
    raise ValueError(f"it says format version {version} but has no manifest, which "
                     f"every version from {FIRST_LISTED} on holds")
  if (array_io.TABLE in f) != (version == 4):
    raise ValueError(f"it says format version {version}, which "
                     f"{'has' if version == 4 else 'has no'} CRC32C table")
  return version


def header(f: h5py.File, format_name: str, file_size: int) -> Header:
  """The checked Header of `f` (a file of `file_size` bytes, open for reading), whose
  format must be `format_name`.

  Raises:
    NotPortableError: a file of no manifest whose format attribute is not `format_name`.
    ValueError (and the errors h5py raises of a damaged file): a manifest that fails
      its checksum or is malformed, attributes that differ from it, or a version that
      differs from what the file holds.
  """
  if MANIFEST_CRC in f.attrs or MANIFEST in f:
    found = _listed(f, file_size)
    if found.attrs.get("format") != format_name:
      raise NotPortableError()
    # The format attribute, a string, is not read: HDF5 keeps it in the file's global
    # heap, whose damage can stall HDF5 itself; a version 5 reader reads nothing there.
    if _plain(f.attrs.get("version")) != found.attrs["version"]:
      raise ValueError("its version attribute differs from its manifest's")
    return found
  if f.attrs.get("format") != format_name:
    raise NotPortableError()
  attrs = {key: f.attrs[key] for key in f.attrs}
  attrs["version"] = _unlisted_version(f)
  return Header(attrs["version"], attrs)
