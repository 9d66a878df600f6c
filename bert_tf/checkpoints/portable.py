"""Backend-neutral ("portable") checkpoints: one HDF5 file per checkpoint, written and
read with h5py and NumPy on every Keras backend (no TensorFlow).

A file `ckpt-N.h5` holds:
  items/<item>/<variable path>   each `checkpoint_items` entry's variables, keyed by
                                 item name and Keras `variable.path` (the same on every
                                 backend), without the dropout seed states;
  optimizer/<name>               a trainer's optimizer state by name, the same on every
                                 backend (bert_tf.constants names it,
                                 bert_tf.training.update_rule describes it): `count`,
                                 `m/<variable path>`, `v/<variable path>`,
                                 `loss_scale/scale`, `loss_scale/good_steps`; restored
                                 only by an optimizer with the same names;
  random_state/<i>               the model's SeedGenerator states in variable order;
  attributes                     format, version, step, and the writing backend.
A trainer keeps each process's input position beside it, under the prefix
`ckpt-N.input[-P]` (input_prefix; P the process index, none for process 0), written
before the .h5: the TensorFlow engine a tf.data iterator checkpoint (`.index`,
`.data-*`), the JAX engine a JSON file (`.json`).

Files are written under a temporary name and renamed, so a reader never sees a
half-written checkpoint; h5py writes local files only, so for a remote directory the
file is written locally, uploaded under a temporary name and renamed there
(bert_tf.utils.files.staged_output), and read from a local copy fetched in a few large
concurrent ranges (bert_tf.utils.range_reads.local_copy). Reading asserts what
TensorFlow checkpoints assert: every variable of a restored item is found with the
same shape, and errors name the file.

Version 1 files held Keras optimizers' variables in order (`optimizer/<i>`, attribute
`path`: `adam_w/<variable path with _>_momentum`, `loss_scale_optimizer/dynamic_scale`);
their moments, loss scale and step restore into the version 2 names.
"""

import contextlib
import dataclasses
import os
import re
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Sequence

import h5py
import numpy as np

from bert_tf import constants
from bert_tf.utils import errors
from bert_tf.utils import files
from bert_tf.utils import range_reads

FORMAT = "bert_tf.portable"
VERSION = 2
SUFFIX = ".h5"
INPUT_SUFFIX = ".input"
_NAME = re.compile(r"^ckpt-(\d+)\.h5$")
# Version 1 files (Keras optimizer variables): the end of the Keras variable's path.
_KERAS_NAMES = {constants.LOSS_SCALE: "dynamic_scale",
                constants.LOSS_SCALE_GOOD_STEPS: "step_counter"}
_KERAS_SLOTS = dict(zip(constants.ADAM_SLOTS, ("momentum", "velocity")))


class PortableCheckpointError(errors.UserError, ValueError):
  """A portable checkpoint that cannot be read, or that does not fit the model."""


def is_portable(path: str) -> bool:
  """Whether `path` is a portable checkpoint file."""
  if not (path.endswith(SUFFIX) and files.exists(path) and not files.isdir(path)):
    return False
  try:
    # A remote file is fetched whole once: the restore that follows reads the copy.
    with h5py.File(_local(path), "r") as f:
      return f.attrs.get("format") == FORMAT
  except OSError:
    return False


def path_for_step(directory: str, step: int) -> str:
  """`directory/ckpt-<step>.h5`."""
  return os.path.join(directory, f"ckpt-{int(step)}{SUFFIX}")


def input_prefix(path: str, process: int = 0) -> str:
  """The TensorFlow checkpoint prefix of the input iterator of process `process`
  saved beside `path` (`ckpt-N.input`, `ckpt-N.input-1`, ...)."""
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


def _path(variable) -> str:
  return getattr(variable, "path", None) or variable.name.split(":")[0]


def item_variables(item) -> Dict[str, object]:
  """{variable path: variable} of a checkpoint item, without SeedGenerator states.

  Raises:
    ValueError: two variables of the item share a path.
  """
  out = {}
  for variable in item.variables:
    path = _path(variable)
    if path.rsplit("/", 1)[-1] == constants.SEED_STATE_NAME:
      continue
    if path in out and out[path] is not variable:
      raise ValueError(f"Two variables of one checkpoint item share the path '{path}'")
    out[path] = variable
  return out


def host_value(variable) -> np.ndarray:
  """A variable's value as a NumPy array, a view of its buffer where the backend gives
  one (CPU tensors); of a value replicated over the devices of several processes (JAX),
  this process's copy."""
  value = getattr(variable, "value", variable)
  if callable(value):  # a tf.Variable's value() (a Keras variable's value is a property)
    value = variable
  if getattr(value, "is_fully_addressable", True) is False:
    value = value.addressable_shards[0].data
  return np.asarray(value)


def _host_copy(variable, into: Optional[np.ndarray] = None) -> np.ndarray:
  """host_value as an array of its own (a view would change with the next step, or be
  donated to it, while the copy is written). Where the backend made a new array
  (TensorFlow's variables) it is that array; a view (JAX's CPU arrays) is copied into
  `into` where its shape and dtype fit (memory already mapped costs less to fill than
  new), else into a new array."""
  value = getattr(variable, "value", variable)
  array = host_value(variable)
  if array.flags.owndata and array is not value and array is not variable:
    return array
  if into is not None and into.shape == array.shape and into.dtype == array.dtype:
    np.copyto(into, array)
    return into
  return np.array(array, copy=True)


def _to_file(value) -> tuple:
  """(array h5py stores, dtype name to restore)."""
  array = np.asarray(value)
  name = str(array.dtype)
  if name == "bfloat16":
    return array.view(np.uint16), name
  return array, name


def _from_file(dataset) -> np.ndarray:
  array = dataset[()]
  if dataset.attrs.get("dtype") == "bfloat16":
    import ml_dtypes  # pylint: disable=g-import-not-at-top
    array = np.asarray(array).view(ml_dtypes.bfloat16)
  return np.asarray(array)


@dataclasses.dataclass
class Snapshot:
  """A checkpoint's content in host memory, ready to write (see `snapshot`).

  Attributes:
    attrs: the file's attributes (format, version, backend, step).
    arrays: {dataset name in the file ("items/encoder/...", "optimizer/m/...",
      "random_state/00000"): NumPy array}, in writing order.
  """

  attrs: Dict[str, object]
  arrays: Dict[str, np.ndarray]


def snapshot(items: Mapping[str, object],
             optimizer_state: Optional[Mapping[str, object]] = None,
             step: Optional[int] = None, random_state: Sequence = (),
             backend: str = "", reuse: Optional[Snapshot] = None) -> Snapshot:
  """Copies a checkpoint's arrays to host memory (the only part of a save that must
  happen before the variables change again).

  Args:
    items: {item name: object with `.variables`} (a model's checkpoint_items).
    optimizer_state: {name: variable or array} of the optimizer's state (the names of
      this module's docstring).
    step: the trainer's step (None for a model-only checkpoint).
    random_state: SeedGenerator state variables, in the model's order.
    backend: the Keras backend that wrote it (for the record).
    reuse: an earlier snapshot no longer needed: its arrays are taken from it one by
      one, filled again or dropped (so that at most one array more than a snapshot is
      held at a time).
  """
  previous = reuse.arrays if reuse is not None else {}
  attrs = {"format": FORMAT, "version": VERSION, "backend": backend}
  if step is not None:
    attrs["step"] = int(step)
  arrays = {}
  for name, item in items.items():
    for variable_path, variable in item_variables(item).items():
      key = f"items/{name}/{variable_path}"
      arrays[key] = _host_copy(variable, previous.pop(key, None))
  for name, variable in (optimizer_state or {}).items():
    key = f"optimizer/{name}"
    arrays[key] = _host_copy(variable, previous.pop(key, None))
  for i, variable in enumerate(random_state):
    key = f"random_state/{i:05d}"
    arrays[key] = _host_copy(variable, previous.pop(key, None))
  return Snapshot(attrs, arrays)


def write(path: str, content: Snapshot) -> str:
  """Writes `content` to `path` (under a temporary name, then renamed); returns `path`."""
  with files.staged_output(path) as temporary, h5py.File(temporary, "w") as f:
    f.attrs.update(content.attrs)
    for group in ("items", "optimizer", "random_state"):
      f.create_group(group)
    for name, value in content.arrays.items():
      array, dtype = _to_file(value)
      f.create_dataset(name, data=array).attrs["dtype"] = dtype
  return path


def save(path: str, items: Mapping[str, object],
         optimizer_state: Optional[Mapping[str, object]] = None,
         step: Optional[int] = None, random_state: Sequence = (),
         backend: str = "") -> str:
  """Writes a portable checkpoint to `path` (under a temporary name, then renamed):
  `write(path, snapshot(...))` with `snapshot`'s arguments; returns `path`."""
  return write(path, snapshot(items, optimizer_state, step, random_state, backend))


def _local(path: str) -> str:
  """The local file to read the checkpoint at `path` from: a remote one fetched whole
  in a few large concurrent ranges (bert_tf.utils.range_reads.local_copy; h5py's own
  reads are many small ones), once for the several reads of one restore."""
  return files.local_path(path) if files.is_local(path) else range_reads.local_copy(path)


@contextlib.contextmanager
def _open(path: str) -> Iterator[h5py.File]:
  """The checkpoint at `path` open for reading (a remote one from its local copy)."""
  try:
    f = h5py.File(_local(path), "r")
  except OSError as e:
    raise PortableCheckpointError(f"Checkpoint {path} is unreadable: {e}") from None
  with f:
    if f.attrs.get("format") != FORMAT:
      raise PortableCheckpointError(f"{path} is not a bert_tf portable checkpoint")
    yield f


def check_readable(path: str) -> None:
  """Reads every array of the checkpoint at `path`.

  Raises:
    PortableCheckpointError: naming the file and the array that fails.
  """
  with _open(path) as f:
    names = []
    f.visit(names.append)
    for name in names:
      if isinstance(f[name], h5py.Dataset):
        try:
          f[name][()]
        except (OSError, ValueError) as e:
          raise PortableCheckpointError(
              f"Checkpoint {path} is unreadable (reading {name}): {e}") from None


def arrays(path: str, group: str = "") -> Dict[str, np.ndarray]:
  """{dataset name: NumPy array} of every array of the checkpoint at `path`, or of
  those under `group` ("items", "optimizer", "random_state") named relative to it;
  bfloat16 arrays as ml_dtypes.bfloat16.

  Raises:
    PortableCheckpointError: the file is unreadable or no portable checkpoint.
  """
  with _open(path) as f:
    return {name: _from_file(dataset)
            for name, dataset in _datasets(f[group] if group else f).items()}


def item_names(path: str) -> set:
  """Names of the items the checkpoint holds, plus `optimizer`, `step` and
  `random_state` where it holds them (the root children of a TF checkpoint)."""
  with _open(path) as f:
    names = set(f["items"].keys())
    if len(f["optimizer"]):
      names.add("optimizer")
    if len(f["random_state"]):
      names.add("random_state")
    if "step" in f.attrs:
      names.add("step")
  if files.exists(input_prefix(path) + ".index"):
    names.add("iterator")
  return names


def item_shapes(path: str, item: str) -> Dict[str, tuple]:
  """{variable path: shape} of one item of the checkpoint at `path` ({} without it)."""
  shapes = {}
  with _open(path) as f:
    if item in f["items"]:
      f["items"][item].visititems(lambda name, node: shapes.__setitem__(name, node.shape)
                                  if isinstance(node, h5py.Dataset) else None)
  return shapes


def _assign(variable, value: np.ndarray, where: str) -> None:
  if tuple(variable.shape) != tuple(value.shape):
    raise PortableCheckpointError(f"{where}: shape {tuple(value.shape)} in the checkpoint, "
                                  f"{tuple(variable.shape)} in the model")
  value = np.asarray(value)  # an h5py dataset is read here, once
  if value.dtype.kind in "biu":
    # Integer state (step counts) takes the variable's integer width.
    value = value.astype(getattr(variable.dtype, "as_numpy_dtype", variable.dtype))
  variable.assign(value)


def restore_items(path: str, checkpoint_items: Mapping[str, object],
                  items: Iterable[str] = ("encoder",)) -> Dict[str, str]:
  """Assigns the named items' variables from the checkpoint at `path`.

  Returns:
    {item: path} for every restored item.

  Raises:
    PortableCheckpointError: an item the model or the checkpoint lacks, a variable of
      the model the checkpoint lacks, or a shape that differs (each naming the file).
  """
  items = list(items)
  missing = [name for name in items if name not in checkpoint_items]
  if missing:
    raise PortableCheckpointError(f"The model has no checkpoint item(s) {missing}; it has "
                                  f"{sorted(checkpoint_items)}")
  with _open(path) as f:
    stored = f["items"]
    absent = [name for name in items if name not in stored]
    if absent:
      raise PortableCheckpointError(f"Checkpoint {path} has no item(s) {absent}; it has "
                                    f"{sorted(stored)}")
    for name in items:
      variables = item_variables(checkpoint_items[name])
      if not variables:
        raise ValueError(f"Checkpoint item '{name}' has no variables yet; build the model "
                         f"before restoring")
      lacking = [p for p in variables if p not in stored[name]
                 or not isinstance(stored[name][p], h5py.Dataset)]
      if lacking:
        raise PortableCheckpointError(
            f"Checkpoint {path} does not cover every variable of '{name}': it lacks "
            f"{', '.join(lacking[:5])}{' ...' if len(lacking) > 5 else ''}")
      for variable_path, variable in variables.items():
        _assign(variable, _from_file(stored[name][variable_path]),
                f"{path}: {name}/{variable_path}")
  return {name: path for name in items}


def _datasets(group) -> Dict[str, object]:
  """{name relative to `group`: dataset} of every dataset under it."""
  out = {}
  group.visititems(lambda name, node: out.__setitem__(name, node)
                   if isinstance(node, h5py.Dataset) else None)
  return out


def _keras_optimizer_state(f, wanted: Iterable[str]) -> Dict[str, object]:
  """A version 1 file's optimizer variables under the version 2 names of `wanted`
  (those it holds): the moments of a variable by Keras's slot names, the count from
  the step (the trainer's step is the update count)."""
  by_suffix = {}
  for key in f["optimizer"]:
    dataset = f["optimizer"][key]
    by_suffix[str(dataset.attrs.get("path", "")).split("/", 1)[-1]] = dataset
  out = {}
  for name in wanted:
    if name == constants.OPTIMIZER_COUNT:
      out[name] = np.asarray(f.attrs["step"], np.int64)
      continue
    slot, _, variable_path = name.partition("/")
    suffix = _KERAS_NAMES.get(name) or (
        f"{variable_path.replace('/', '_')}_{_KERAS_SLOTS[slot]}" if slot in _KERAS_SLOTS
        else None)
    if suffix in by_suffix:
      out[name] = by_suffix[suffix]
  return out


def restore_trainer_state(path: str, optimizer_state: Optional[Mapping[str, object]] = None,
                          random_state: Sequence = ()) -> int:
  """Assigns the optimizer state and SeedGenerator states saved in a trainer checkpoint;
  returns its step.

  Args:
    optimizer_state: {name: variable} of the optimizer (this module's docstring).

  Raises:
    PortableCheckpointError: the checkpoint holds no step, or the state of another
      optimizer (other names or shapes), naming the file.
  """
  optimizer_state = dict(optimizer_state or {})
  with _open(path) as f:
    if "step" not in f.attrs:
      raise PortableCheckpointError(f"Checkpoint {path} is no trainer checkpoint (no step)")
    if int(f.attrs.get("version", 1)) < 2:
      saved = _keras_optimizer_state(f, optimizer_state)
      lacking, extra = sorted(set(optimizer_state) - set(saved)), []
    else:
      saved = _datasets(f["optimizer"])
      lacking = sorted(set(optimizer_state) - set(saved))
      extra = sorted(set(saved) - set(optimizer_state))
    if lacking or extra:
      raise PortableCheckpointError(
          f"Checkpoint {path} holds the state of another optimizer ({len(saved)} "
          f"arrays, this run's has {len(optimizer_state)}; the checkpoint lacks "
          f"{lacking[:3] or '-'}, and holds {extra[:3] or '-'} beyond it)")
    for name, variable in optimizer_state.items():
      value = saved[name]
      _assign(variable, value if isinstance(value, np.ndarray) else _from_file(value),
              f"{path}: optimizer/{name}")
    seeds = [f["random_state"][key] for key in sorted(f["random_state"])]
    if seeds and len(seeds) != len(random_state):
      raise PortableCheckpointError(f"Checkpoint {path} holds {len(seeds)} random states, "
                                    f"the model has {len(random_state)}")
    for dataset, variable in zip(seeds, random_state):
      _assign(variable, _from_file(dataset), f"{path}: random_state")
    return int(f.attrs["step"])
