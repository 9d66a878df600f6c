"""A portable checkpoint's content in host memory (bert_tf.checkpoints.portable writes
and reads it): the arrays copied from a model's checkpoint items, an optimizer's state,
the random states, the step and the input position, under their names in the file."""

import dataclasses
from typing import Dict, Mapping, Optional, Sequence

import numpy as np

from bert_tf import constants

# The names in the file of the trainer's step and of the input position's group.
STEP = "step"
INPUT = "input"


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
  one (CPU tensors: JAX's, torch's); of a value replicated over the devices of several
  processes (JAX), this process's copy."""
  value = getattr(variable, "value", variable)
  if callable(value):  # a tf.Variable's value() (a Keras variable's value is a property)
    value = variable
  if getattr(value, "is_fully_addressable", True) is False:
    value = value.addressable_shards[0].data
  if callable(getattr(value, "detach", None)):  # a torch tensor, which may require grad
    value = value.detach().cpu()
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


@dataclasses.dataclass
class Snapshot:
  """A checkpoint's content in host memory: ready to write (see `snapshot`), or read
  and verified (see portable.read).

  Attributes:
    attrs: the file's attributes (format, version, backend; `step` in version 2).
    arrays: {dataset name in the file ("items/encoder/...", "optimizer/m/...",
      "random_state/00000", "step", "input/batches_read"): NumPy array}, in writing
      order; a shared variable's second name maps to the same array.
    links: {dataset name: the name it is stored under} of the arrays stored once for
      several names (written as hard links).
    source: the file it was read from ("" for one to write).
  """

  attrs: Dict[str, object]
  arrays: Dict[str, np.ndarray]
  links: Dict[str, str] = dataclasses.field(default_factory=dict)
  source: str = ""

  @property
  def step(self) -> Optional[int]:
    """The trainer's step, or None for a model-only checkpoint."""
    if STEP in self.arrays:
      return int(self.arrays[STEP])
    return int(self.attrs[STEP]) if STEP in self.attrs else None

  @property
  def position(self) -> Optional[Dict[str, int]]:
    """{name: value} of the input position it holds (`input/<name>`), or None."""
    prefix = INPUT + "/"
    found = {name[len(prefix):]: int(value) for name, value in self.arrays.items()
             if name.startswith(prefix)}
    return found or None

  def group(self, group: str) -> Dict[str, np.ndarray]:
    """{name relative to `group`: array} of the arrays under `group`."""
    prefix = group.rstrip("/") + "/"
    return {name[len(prefix):]: value for name, value in self.arrays.items()
            if name.startswith(prefix)}


def snapshot(items: Mapping[str, object],
             optimizer_state: Optional[Mapping[str, object]] = None,
             step: Optional[int] = None, random_state: Sequence = (),
             backend: str = "", reuse: Optional[Snapshot] = None,
             position: Optional[Mapping[str, int]] = None) -> Snapshot:
  """Copies a checkpoint's arrays to host memory (the only part of a save that must
  happen before the variables change again).

  Args:
    items: {item name: object with `.variables`} (a model's checkpoint_items).
    optimizer_state: {name: variable or array} of the optimizer's state (the names of
      bert_tf.checkpoints.portable's docstring).
    step: the trainer's step (None for a model-only checkpoint).
    random_state: SeedGenerator state variables, in the model's order.
    backend: the Keras backend that wrote it (for the record).
    reuse: an earlier snapshot no longer needed: its arrays are taken from it one by
      one, filled again or dropped (so that at most one array more than a snapshot is
      held at a time).
    position: {name: int} of the training input's position (the `input` group).
  """
  previous = reuse.arrays if reuse is not None else {}
  attrs = {"backend": backend}  # the format and version: portable.write's
  arrays, links, stored_as = {}, {}, {}
  for name, item in items.items():
    for variable_path, variable in item_variables(item).items():
      key = f"items/{name}/{variable_path}"
      if id(variable) in stored_as:  # shared with an item before: stored once
        links[key] = stored_as[id(variable)]
        continue
      stored_as[id(variable)] = key
      arrays[key] = _host_copy(variable, previous.pop(key, None))
  for name, variable in (optimizer_state or {}).items():
    key = f"optimizer/{name}"
    arrays[key] = _host_copy(variable, previous.pop(key, None))
  for i, variable in enumerate(random_state):
    key = f"random_state/{i:05d}"
    arrays[key] = _host_copy(variable, previous.pop(key, None))
  if step is not None:
    arrays[STEP] = np.asarray(step, np.int64)
  for name, value in (position or {}).items():
    arrays[f"{INPUT}/{name}"] = np.asarray(value, np.uint64 if value >= 2**63 else np.int64)
  return Snapshot(attrs, arrays, links)
