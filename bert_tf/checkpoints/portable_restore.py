"""Restoring a portable checkpoint (bert_tf.checkpoints.portable) into a model and a
trainer: each item's variables by path, the optimizer state by name (and a version 1
file's Keras optimizer variables under those names), the random states and the step;
every variable of a restored item must be found with its shape, and errors name the
file."""

import sys
from typing import Dict, Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from bert_tf import constants
from bert_tf.checkpoints import array_io
from bert_tf.checkpoints import portable
from bert_tf.checkpoints import snapshots
from bert_tf.checkpoints.portable import PortableCheckpointError
from bert_tf.checkpoints.snapshots import Snapshot

# Version 1 files (Keras optimizer variables): the end of the Keras variable's path.
_KERAS_NAMES = {constants.LOSS_SCALE: "dynamic_scale",
                constants.LOSS_SCALE_GOOD_STEPS: "step_counter"}
_KERAS_SLOTS = dict(zip(constants.ADAM_SLOTS, ("momentum", "velocity")))


def _tensorflow_sharing(variable, value: np.ndarray):
  """`value` as a TensorFlow tensor sharing its memory, where `variable` is TensorFlow's
  and `value` a float array of the variable's dtype, of at least array_io.LARGE_BYTES,
  starting on the 64-byte boundary TensorFlow's kernels need; None otherwise.

  Assigning a NumPy array copies it twice (TensorFlow copies it before it makes a tensor
  of it, then into memory aligned for the tensor, newly allocated each time): 4 s of a
  restore of BERT-base with its optimizer state on 2 cores. The variable takes the
  shared memory as its own, so the array must not be used again (TensorFlow copies on
  write only what it knows to be shared)."""
  tf = sys.modules.get("tensorflow")
  if (tf is None or value.nbytes < array_io.LARGE_BYTES or value.ctypes.data % 64
      or value.dtype.kind != "f" or not value.flags.c_contiguous or not value.flags.writeable
      or np.dtype(getattr(variable.dtype, "as_numpy_dtype", variable.dtype)) != value.dtype
      or not isinstance(getattr(variable, "value", None), tf.Variable)
      and not isinstance(variable, tf.Variable)):
    return None
  return tf.experimental.dlpack.from_dlpack(value.__dlpack__())


def _assign(variable, value: np.ndarray, where: str, hand_over: bool = False) -> None:
  """variable.assign(value), checking the shape; with `hand_over`, a TensorFlow variable
  may take the array's memory (_tensorflow_sharing): the array is not used again."""
  if tuple(variable.shape) != tuple(value.shape):
    raise PortableCheckpointError(f"{where}: shape {tuple(value.shape)} in the checkpoint, "
                                  f"{tuple(variable.shape)} in the model")
  value = np.asarray(value)
  if value.dtype.kind in "biu":
    # Integer state (step counts) takes the variable's integer width.
    value = value.astype(getattr(variable.dtype, "as_numpy_dtype", variable.dtype))
  shared = _tensorflow_sharing(variable, value) if hand_over else None
  variable.assign(value if shared is None else shared)


Source = Union[str, Snapshot]


def _content(source: Source, groups: Sequence[str], hand_over: bool,
             variables: Mapping[str, object]) -> tuple:
  """(path for messages, Snapshot, whether its arrays may be handed to the variables)
  of a path (reading `groups`, each of `variables`' arrays ({name in the file:
  variable}) checked for its shape before it is allocated: the arrays are this
  restore's own) or a Snapshot read."""
  if isinstance(source, Snapshot):
    return source.source, source, hand_over
  shapes = {name: tuple(variable.shape) for name, variable in variables.items()}
  return source, portable.read(source, groups, shapes), True


def restore_items(source: Source, checkpoint_items: Mapping[str, object],
                  items: Iterable[str] = ("encoder",), hand_over: bool = False
                  ) -> Dict[str, str]:
  """Assigns the named items' variables from the checkpoint at `source` (a path, or
  the Snapshot portable.read returned); a variable two items share is assigned once.
  `hand_over`: the Snapshot's arrays are not used after, so TensorFlow's variables may
  take their memory rather than a copy (_tensorflow_sharing).

  Returns:
    {item: path} for every restored item.

  Raises:
    PortableCheckpointError: an item the model or the checkpoint lacks, a variable of
      the model the checkpoint lacks, a shape that differs (each naming the file), or
      an array that fails its checksum.
  """
  items = list(items)
  missing = [name for name in items if name not in checkpoint_items]
  if missing:
    raise PortableCheckpointError(f"The model has no checkpoint item(s) {missing}; it has "
                                  f"{sorted(checkpoint_items)}")
  variables_of = {name: snapshots.item_variables(checkpoint_items[name]) for name in items}
  path, content, owned = _content(
      source, [f"items/{name}" for name in items], hand_over,
      {f"items/{name}/{variable_path}": variable for name in items
       for variable_path, variable in variables_of[name].items()})
  stored = {name: content.group(f"items/{name}") for name in items}
  absent = [name for name in items if not stored[name]]
  if absent:
    held = portable.stored_items(path)
    raise PortableCheckpointError(f"Checkpoint {path} has no item(s) {absent}; it has "
                                  f"{held}")
  assigned = set()
  for name in items:
    variables = variables_of[name]
    if not variables:
      raise ValueError(f"Checkpoint item '{name}' has no variables yet; build the model "
                       f"before restoring")
    lacking = [p for p in variables if p not in stored[name]]
    if lacking:
      raise PortableCheckpointError(
          f"Checkpoint {path} does not cover every variable of '{name}': it lacks "
          f"{', '.join(lacking[:5])}{' ...' if len(lacking) > 5 else ''}")
    for variable_path, variable in variables.items():
      if id(variable) in assigned:  # shared with an item restored before
        continue
      assigned.add(id(variable))
      _assign(variable, stored[name][variable_path], f"{path}: {name}/{variable_path}",
              owned)
  return {name: path for name in items}


def _keras_optimizer_state(content: Snapshot, wanted: Iterable[str]
                           ) -> Dict[str, np.ndarray]:
  """A version 1 file's optimizer variables under the version 2 names of `wanted`
  (those it holds): the moments of a variable by Keras's slot names, the count from
  the step (the trainer's step is the update count)."""
  paths = content.attrs.get("optimizer_paths", {})
  by_suffix = {paths.get(f"optimizer/{key}", "").split("/", 1)[-1]: value
               for key, value in content.group("optimizer").items()}
  out = {}
  for name in wanted:
    if name == constants.OPTIMIZER_COUNT:
      out[name] = np.asarray(content.step, np.int64)
      continue
    slot, _, variable_path = name.partition("/")
    suffix = _KERAS_NAMES.get(name) or (
        f"{variable_path.replace('/', '_')}_{_KERAS_SLOTS[slot]}" if slot in _KERAS_SLOTS
        else None)
    if suffix in by_suffix:
      out[name] = by_suffix[suffix]
  return out


def restore_trainer_state(source: Source,
                          optimizer_state: Optional[Mapping[str, object]] = None,
                          random_state: Sequence = (), hand_over: bool = False) -> int:
  """Assigns the optimizer state and SeedGenerator states saved in a trainer checkpoint
  (a path, or the Snapshot portable.read returned; `hand_over` as restore_items's);
  returns its step.

  Args:
    optimizer_state: {name: variable} of the optimizer (this module's docstring).

  Raises:
    PortableCheckpointError: the checkpoint holds no step, or the state of another
      optimizer (other names or shapes), naming the file; an array that fails its
      checksum.
  """
  optimizer_state = dict(optimizer_state or {})
  path, content, owned = _content(source, ("optimizer", "random_state", snapshots.STEP),
                                  hand_over, {f"optimizer/{name}": variable
                                              for name, variable in optimizer_state.items()})
  if content.step is None:
    raise PortableCheckpointError(f"Checkpoint {path} is no trainer checkpoint (no step)")
  # A snapshot not read from a file (snapshots.snapshot) is of this version.
  if int(content.attrs.get("version", portable.VERSION)) < 2:
    saved = _keras_optimizer_state(content, optimizer_state)
    lacking, extra = sorted(set(optimizer_state) - set(saved)), []
  else:
    saved = content.group("optimizer")
    lacking = sorted(set(optimizer_state) - set(saved))
    extra = sorted(set(saved) - set(optimizer_state))
  if lacking or extra:
    raise PortableCheckpointError(
        f"Checkpoint {path} holds the state of another optimizer ({len(saved)} "
        f"arrays, this run's has {len(optimizer_state)}; the checkpoint lacks "
        f"{lacking[:3] or '-'}, and holds {extra[:3] or '-'} beyond it)")
  for name, variable in optimizer_state.items():
    _assign(variable, saved[name], f"{path}: optimizer/{name}", owned)
  seeds = [value for _, value in sorted(content.group("random_state").items())]
  if seeds and len(seeds) != len(random_state):
    raise PortableCheckpointError(f"Checkpoint {path} holds {len(seeds)} random states, "
                                  f"the model has {len(random_state)}")
  for value, variable in zip(seeds, random_state):
    _assign(variable, value, f"{path}: random_state")
  return content.step
