"""A training run's checkpoints: one format on every engine, saved every N steps, the
last K kept, the newest readable one resumed.

The format is the portable one (bert_tf.checkpoints.portable): `ckpt-N.h5`, HDF5
written with h5py, holding the model's checkpoint items, the optimizer's state, the
step and the dropout random state. It needs no TensorFlow, so the JAX engine reads and
writes it where TensorFlow is absent, and a run stopped on one engine resumes on the
other. Each process's input position is a file of its engine's input beside it
(`ckpt-N.input...`), written before the .h5, so that a `ckpt-N.h5` on disk comes with
its positions; a run that finds no position of its own input skips the consumed
batches instead.

model_dir may be remote (bert_tf.utils.files): the .h5 is uploaded under a temporary
name and renamed there, and the input positions, which the engines' inputs write and
read as local files, are written to a local folder and uploaded before it (downloaded
again for a resume).

Model directories of older versions hold TensorFlow checkpoints (`ckpt-N.index`); the
TensorFlow engine resumes from them (its own helper, tf_engine.legacy_checkpoints) and
from then on writes the portable format; the JAX engine refuses them in one line.
"""

import contextlib
import glob
import os
import re
import shutil
import tempfile
from typing import Iterator, Optional

import keras

from bert_tf.checkpoints import portable
from bert_tf.checkpoints import restore
from bert_tf.training import engine as engine_lib
from bert_tf.training import steps
from bert_tf.utils import errors
from bert_tf.utils import file_systems
from bert_tf.utils import files

_LEGACY_INDEX = re.compile(r"^ckpt-(\d+)\.index$")


def newest_legacy_checkpoint(model_dir: str) -> Optional[str]:
  """The prefix of the highest-step TensorFlow checkpoint in model_dir (by name), or
  None."""
  steps = [int(m.group(1)) for m in map(_LEGACY_INDEX.match, files.listdir(model_dir)) if m]
  return os.path.join(model_dir, f"ckpt-{max(steps)}") if steps else None


def step_of(checkpoint: str) -> int:
  """N of `ckpt-N.h5` or of a TensorFlow prefix `ckpt-N`."""
  name = os.path.basename(checkpoint)
  if name.endswith(portable.SUFFIX):
    name = name[:-len(portable.SUFFIX)]
  return int(name.rsplit("-", 1)[-1])


def _legacy_checkpoints(model_dir: str):
  """The TensorFlow engine's reader of the TensorFlow checkpoints older versions wrote
  (bert_tf.training.tf_engine.legacy_checkpoints).

  Raises:
    UserError: on another backend, which cannot read them (one line).
  """
  if keras.backend.backend() != "tensorflow":
    raise errors.UserError(
        f"{model_dir} holds TensorFlow checkpoints (ckpt-N.index) of an older version: "
        "resume it once on the TensorFlow engine (runtime.backend=tensorflow), which "
        "continues in the portable format (ckpt-N.h5) that every engine reads")
  from bert_tf.training.tf_engine import legacy_checkpoints  # pylint: disable=g-import-not-at-top
  return legacy_checkpoints


class CheckpointSaver:
  """Writes, finds and restores the checkpoints of one model_dir for an engine.

  Args:
    model_dir: where the checkpoints go.
    max_to_keep: how many of the newest checkpoints are kept.
    engine: the run's engine (its variables, input position and processes).
  """

  def __init__(self, model_dir: str, max_to_keep: int, engine: engine_lib.Engine):
    self.model_dir = model_dir
    self.max_to_keep = max_to_keep
    self.engine = engine

  def latest(self) -> Optional[str]:
    """The checkpoint to resume from: the newest readable `ckpt-N.h5` (damaged newer
    ones are skipped with a warning naming them), or a TensorFlow checkpoint of an
    older version where its step is higher; None when model_dir holds neither."""
    found = restore.newest_readable_portable(self.model_dir)
    legacy = newest_legacy_checkpoint(self.model_dir)
    if legacy and (found is None or step_of(legacy) > step_of(found)):
      return _legacy_checkpoints(self.model_dir).newest_readable(self.model_dir) or found
    return found

  def restore(self, checkpoint: str) -> int:
    """Restores the model's items, optimizer, step and random state from
    `checkpoint` (see `latest`); returns its step."""
    if not checkpoint.endswith(portable.SUFFIX):
      step = _legacy_checkpoints(self.model_dir).restore_trainer(self.engine, checkpoint)
    else:
      model = self.engine.model
      portable.restore_items(checkpoint, model.trained_items, tuple(model.trained_items))
      step = portable.restore_trainer_state(checkpoint, self.engine.optimizer_state(),
                                            steps.seed_states(model))
    self.engine.step = step
    return step

  def save(self) -> str:
    """Writes the checkpoint of the engine's current step (every process's input
    position, then the .h5 on the chief); returns its path."""
    engine = self.engine
    step = engine.step
    path = portable.path_for_step(self.model_dir, step)
    engine.sync_to_model()
    files.make_dirs(self.model_dir)
    self._save_input_position(path)
    engine.barrier(f"input positions of step {step}")
    if engine.is_chief:
      portable.save(path, engine.model.trained_items, engine.optimizer_state(),
                    step=step, random_state=steps.seed_states(engine.model),
                    backend=keras.backend.backend())
      self._delete_old()
    engine.barrier(f"checkpoint of step {step}")
    return path

  def _save_input_position(self, checkpoint: str) -> None:
    if not file_systems.is_remote(checkpoint):
      self.engine.save_input_position(checkpoint)
      return
    with tempfile.TemporaryDirectory() as local_dir:
      self.engine.save_input_position(os.path.join(local_dir, os.path.basename(checkpoint)))
      for name in sorted(os.listdir(local_dir)):
        with files.atomic_path(os.path.join(self.model_dir, name)) as temporary:
          files.copy(os.path.join(local_dir, name), temporary)

  def _delete_old(self) -> None:
    for path in portable.checkpoints_in(self.model_dir)[self.max_to_keep:]:
      files.remove(path)
      for sidecar in files.glob(glob.escape(portable.input_prefix(path)) + "*"):
        files.remove(sidecar)


@contextlib.contextmanager
def local_input_positions(checkpoint: Optional[str]) -> Iterator[Optional[str]]:
  """Yields the checkpoint path to build the training input from: `checkpoint` itself
  where it is local (or None), otherwise its name in a local folder holding a copy of
  its input positions (the engines' inputs read local files)."""
  if checkpoint is None or not file_systems.is_remote(checkpoint):
    yield checkpoint
    return
  local_dir = tempfile.mkdtemp()
  try:
    for path in files.glob(glob.escape(portable.input_prefix(checkpoint)) + "*"):
      files.copy(path, os.path.join(local_dir, os.path.basename(path)))
    yield os.path.join(local_dir, os.path.basename(checkpoint))
  finally:
    shutil.rmtree(local_dir)
