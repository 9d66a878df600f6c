"""Backend-neutral ("portable") checkpoints: one HDF5 file per checkpoint, written and
read with h5py and NumPy on every Keras backend (no TensorFlow).

A file `ckpt-N.h5` (version 5) holds:
  items/<item>/<variable path>   each `checkpoint_items` entry's variables by Keras
                                 `variable.path` (the same on every backend), without
                                 dropout seed states; a variable two items share (the
                                 tied word embeddings) is stored once, under its first
                                 item, and hard-linked under the other;
  optimizer/<name>               a trainer's optimizer state by name, the same on every
                                 backend (bert_tf.constants, bert_tf.training.update_rule):
                                 `count`, `m/<variable path>`, `v/<variable path>`,
                                 `loss_scale/scale`, `loss_scale/good_steps`;
  random_state/<i>               the model's SeedGenerator states in variable order;
  step                           the trainer's step (int64, trainer checkpoints);
  input/<name>                   the training input's position in the record order
                                 (bert_tf.training.input_source.POSITION), one for
                                 every process;
  manifest                       the record of all the reader acts on: the attributes,
                                 each array's name, dtype, shape and CRC32C, the links;
                                 its own CRC32C an attribute (bert_tf.checkpoints.manifest);
  attributes                     format, version and the writing backend.
Each CRC32C (bert_tf.checkpoints.checksums) is computed when the array is written and
checked on the bytes read when it is read: a mismatch, or a manifest that fails its
own, is a DamagedCheckpointError naming the file and the array
(bert_tf.checkpoints.readable). Nothing is allocated for an array before its shape is
checked against the manifest and the file's size (bert_tf.checkpoints.array_io). Files
of version 4 keep the CRC32Cs in a table, those of version 3 as an attribute of each
array, checked the same; files of earlier versions carry none: they are read with one
line saying so.

Files are written under a temporary name and renamed (bert_tf.utils.files.staged_output:
for a remote directory, written locally, uploaded under a temporary name and renamed
there), and a remote one is read from a local copy fetched in a few large concurrent
ranges (bert_tf.utils.range_reads.local_copy). The content in host memory:
bert_tf.checkpoints.snapshots; restoring it into a model and a trainer:
bert_tf.checkpoints.portable_restore.

Earlier versions: version 4 had no manifest (its version attribute is checked against
what the file holds); version 2 stored a shared variable under each item, the step as an
attribute, and the input position beside the file (`ckpt-N.input[-P]...`, see
input_prefix); version 1 held Keras optimizers' variables in order (`optimizer/<i>`,
attribute `path`: `adam_w/<variable path with _>_momentum`,
`loss_scale_optimizer/dynamic_scale`), whose moments, loss scale and step restore into
the version 2 names.
"""

import contextlib
import logging
import os
import re
from typing import (Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence,
                    Tuple)

import h5py
import numpy as np

from bert_tf.checkpoints import array_io
from bert_tf.checkpoints import manifest
from bert_tf.checkpoints import snapshots
from bert_tf.utils import errors
from bert_tf.utils import files
from bert_tf.utils import range_reads

FORMAT = "bert_tf.portable"
VERSION = 5
SUFFIX = ".h5"
INPUT_SUFFIX = ".input"
_GROUPS = ("items", "optimizer", "random_state")
_NAME = re.compile(r"^ckpt-(\d+)\.h5$")
# The checkpoints of an earlier version already said to be read unverified.
_UNVERIFIED_SAID = set()
# What h5py, NumPy and the manifest's checks raise of a damaged or crafted file.
_DAMAGE = (OSError, ValueError, LookupError, RuntimeError, TypeError, ArithmeticError)


class PortableCheckpointError(errors.UserError, ValueError):
  """A portable checkpoint that cannot be read, fails its checksums, or does not fit
  the model."""


class DamagedCheckpointError(PortableCheckpointError):
  """A portable checkpoint cut short, unreadable, or with an array that fails its
  checksum; the message names the file (and the array)."""


class NewerCheckpointError(errors.UserError, ValueError):
  """A portable checkpoint of a format version this bert_tf does not know: not damaged,
  so never skipped for an older one."""


def is_portable(path: str) -> bool:
  """Whether `path` is a portable checkpoint file."""
  if not (path.endswith(SUFFIX) and files.exists(path) and not files.isdir(path)):
    return False
  try:
    # A remote file is fetched whole once: the restore that follows reads the copy.
    with h5py.File(_local(path), "r") as f:
      return manifest.MANIFEST_CRC in f.attrs or f.attrs.get("format") == FORMAT
  except _DAMAGE:
    return False


def path_for_step(directory: str, step: int) -> str:
  """`directory/ckpt-<step>.h5`."""
  return os.path.join(directory, f"ckpt-{int(step)}{SUFFIX}")


def input_prefix(path: str, process: int = 0) -> str:
  """The prefix of the files beside `path` that belong to process `process`
  (`ckpt-N.input`, `ckpt-N.input-1`, ...): the input positions of version 2, and the
  markers of a checkpoint of several processes."""
  return path[:-len(SUFFIX)] + INPUT_SUFFIX + (f"-{process}" if process else "")


def step_of(path: str) -> int:
  """The step in a `ckpt-N.h5` name."""
  match = _NAME.match(os.path.basename(path))
  if not match:
    raise ValueError(f"{path} is not named ckpt-<step>{SUFFIX}")
  return int(match.group(1))


def checkpoints_in(directory: str, names: Optional[Iterable[str]] = None) -> List[str]:
  """The portable checkpoints in `directory`, newest (highest step) first; `names`: its
  listing, where the caller has it already."""
  names = [name for name in (files.listdir(directory) if names is None else names)
           if _NAME.match(name)]
  return [os.path.join(directory, name)
          for name in sorted(names, key=lambda n: -int(_NAME.match(n).group(1)))]


def _to_file(value) -> tuple:
  """(array h5py stores, dtype name to restore)."""
  array = np.asarray(value)
  name = str(array.dtype)
  if name == "bfloat16":
    return array.view(np.uint16), name
  return array, name


def write(path: str, content: snapshots.Snapshot) -> str:
  """Writes `content` to `path` (under a temporary name, then renamed), each array with
  its CRC32C; returns `path`."""
  attrs = dict(content.attrs, format=FORMAT, version=VERSION)
  with files.staged_output(path) as temporary, h5py.File(temporary, "w") as f:
    f.attrs.update(attrs)
    for group in _GROUPS:
      f.create_group(group)
    writer = array_io.Writer(f, temporary)
    entries = {}
    for name, value in content.arrays.items():
      array, dtype = _to_file(value)
      writer.add(name, array, {"dtype": dtype})
      entries[name] = (array.dtype.str, array.shape, dtype)
    for name, target in content.links.items():
      writer.link(name, target)
    crcs = writer.finish()
    manifest.write(f, attrs, {name: manifest.Entry(*entry, crcs.get(name))
                              for name, entry in entries.items()}, content.links)
  return path


def save(path: str, items: Mapping[str, object],
         optimizer_state: Optional[Mapping[str, object]] = None,
         step: Optional[int] = None, random_state: Sequence = (),
         backend: str = "") -> str:
  """Writes a portable checkpoint to `path` (under a temporary name, then renamed):
  `write(path, snapshots.snapshot(...))` with its arguments; returns `path`."""
  return write(path, snapshots.snapshot(items, optimizer_state, step, random_state,
                                        backend))


def _local(path: str) -> str:
  """The local file to read the checkpoint at `path` from: a remote one fetched whole
  in a few large concurrent ranges (bert_tf.utils.range_reads.local_copy; h5py's own
  reads are many small ones), once for the several reads of one restore."""
  return files.local_path(path) if files.is_local(path) else range_reads.local_copy(path)


@contextlib.contextmanager
def _damage(path: str, what: Callable[[], str]) -> Iterator[None]:
  """Turns what a damaged or crafted file makes h5py or the checks raise into one
  DamagedCheckpointError naming the file and `what()` was being read."""
  try:
    yield
  except errors.UserError:
    raise
  except array_io.OtherShapeError as e:  # not damage: a checkpoint of another model
    raise PortableCheckpointError(f"Checkpoint {path}: {e}") from None
  except _DAMAGE as e:
    raise DamagedCheckpointError(f"Checkpoint {path} is unreadable ({what()}): "
                                 + " ".join(str(e).split())) from None


@contextlib.contextmanager
def _open(path: str) -> Iterator[Tuple[h5py.File, manifest.Header]]:
  """The checkpoint at `path` open for reading (a remote one from its local copy), and
  its checked header (bert_tf.checkpoints.manifest)."""
  local = _local(path)
  try:
    f = h5py.File(local, "r")
  except OSError as e:
    raise DamagedCheckpointError(f"Checkpoint {path} is unreadable: {e}") from None
  with f:
    with _damage(path, lambda: "reading its header"):
      try:
        header = manifest.header(f, FORMAT, os.path.getsize(local))
      except manifest.NotPortableError:
        raise PortableCheckpointError(f"{path} is not a bert_tf portable checkpoint") from None
    if header.version > VERSION:
      raise NewerCheckpointError(
          f"{path} was written by a newer bert_tf (checkpoint format version "
          f"{header.version}; this one reads versions 1 to {VERSION}): upgrade "
          "bert_tf to read it")
    yield f, header


def _verify(path: str, checks: Mapping[str, object]) -> None:
  """Raises DamagedCheckpointError naming the first of `checks` ({dataset name: check
  of array_io.Reader.read}) whose CRC32C read differs from the one written."""
  for name, check in checks.items():
    read_crc, written = check()
    if read_crc != written:
      raise DamagedCheckpointError(
          f"Checkpoint {path} fails its checksum at {name} (CRC32C {read_crc:08x} "
          f"read, {written:08x} written)")


def _wanted(name: str, groups: Optional[Sequence[str]]) -> bool:
  return groups is None or any(name == g or name.startswith(g + "/") for g in groups)


def read(path: str, groups: Optional[Sequence[str]] = None,
         shapes: Optional[Mapping[str, Sequence[int]]] = None) -> snapshots.Snapshot:
  """Reads the arrays of the checkpoint at `path` (those under `groups`, e.g.
  ("items/encoder", "step"), or all), each stored array once, checking the CRC32C of
  each as it is read, and the shape of those in `shapes` ({name: the model's shape})
  before it is allocated. A file of an earlier version (no checksums) is read with one
  warning line saying so, once per file.

  Raises:
    PortableCheckpointError: the file is unreadable or no portable checkpoint, an
      array fails its checksum or differs from its shape in `shapes` (naming the file
      and the array).
  """
  with _open(path) as (f, header):
    attrs, legacy_paths, version = dict(header.attrs), {}, header.version
    with array_io.Reader(f, header.crcs_in, header.arrays, header.links, shapes) as reader, \
        _damage(path, lambda: f"reading {reader.reading}"):
      names = [*header.arrays, *header.links] if header.arrays is not None else []
      if header.arrays is None:
        f.visit_links(names.append)  # every name, a hard-linked array's both
      arrays, checks = reader.read([name for name in names if _wanted(name, groups)])
      if version < 2:
        legacy_paths = {name: str(f[name].attrs["path"]) for name in arrays
                        if "path" in f[name].attrs}
      _verify(path, checks)
  if version < 3 and path not in _UNVERIFIED_SAID:
    _UNVERIFIED_SAID.add(path)
    logging.warning("Checkpoint %s was written by an earlier version without checksums: "
                    "read unverified", path)
  if legacy_paths:
    attrs["optimizer_paths"] = legacy_paths
  return snapshots.Snapshot(attrs, arrays, source=path)


def check_readable(path: str) -> None:
  """Reads every array of the checkpoint at `path`, checking its checksum; raises
  PortableCheckpointError naming the file and the array that fails."""
  read(path)


def arrays(path: str, group: str = "") -> Dict[str, np.ndarray]:
  """{dataset name: NumPy array} of every array of the checkpoint at `path`, or of
  those under `group` ("items", "optimizer", "random_state") named relative to it;
  bfloat16 arrays as ml_dtypes.bfloat16; a shared variable under each name. Raises
  PortableCheckpointError: the file is unreadable, no checkpoint, or fails its checksums.
  """
  return read(path, (group,)).group(group) if group else read(path).arrays


def item_names(path: str) -> set:
  """Names of the items the checkpoint holds, plus `optimizer`, `step`,
  `random_state` and `input` (its input position) where it holds them (the root
  children of a TF checkpoint)."""
  with _open(path) as (f, _), _damage(path, lambda: "reading its items"):
    names = set(f["items"])
    for group in ("optimizer", "random_state", snapshots.INPUT):
      if group in f and len(f[group]):
        names.add(group)
    if snapshots.STEP in f.attrs or snapshots.STEP in f:
      names.add(snapshots.STEP)
  if snapshots.INPUT not in names and files.exists(input_prefix(path) + ".index"):
    names.add(snapshots.INPUT)
  return names


def stored_items(path: str) -> List[str]:
  """The names of the items the checkpoint at `path` holds, sorted."""
  with _open(path) as (f, _), _damage(path, lambda: "reading its items"):
    return sorted(f["items"])


def item_shapes(path: str, item: str) -> Dict[str, tuple]:
  """{variable path: shape} of one item of the checkpoint at `path` ({} without it)."""
  shapes = {}
  with _open(path) as (f, _), _damage(path, lambda: f"reading items/{item}"):
    if item in f["items"]:
      names = []
      f["items"][item].visit_links(names.append)
      for name in names:
        node = f["items"][item][name]
        if isinstance(node, h5py.Dataset):
          shapes[name] = node.shape
  return shapes


