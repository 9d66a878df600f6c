"""A training run's checkpoints: one format on every engine, saved every N steps, the
last K kept, the newest readable one resumed.

The format is the portable one (bert_tf.checkpoints.portable): `ckpt-N.h5`, HDF5
written with h5py, holding the model's checkpoint items, the optimizer's state, the
step, the dropout random state and the input position (bert_tf.training.input_source:
one for every process and engine), each array with its CRC32C. It needs no
TensorFlow, so the JAX engine reads and writes it where TensorFlow is absent, and a run
stopped on one engine resumes on the other. The resume reads the newest checkpoint once,
checking each array's checksum as it is read; one that is damaged (cut short, or an
array that fails its checksum) is named in one line and the newest one that verifies
is used. Checkpoints of earlier versions (no checksums, the input position beside the
.h5: `ckpt-N.input...`) restore with a line saying they are unverified.

A save blocks the step only while the arrays are copied to host memory (NumPy copies of
the variables) and the input position is taken; the file is written, uploaded and
committed on a background thread (trainer.async_checkpoints; off: on the training
thread). At most one save is in flight: the next save, `latest`, the end of
`Trainer.train` (SIGTERM, a corrupt record, a non-finite loss included) and the process's
exit wait for it, and a write that failed raises CheckpointWriteError, naming the path,
on the training thread there. The .h5 appears under its name only when complete (a
temporary name, then a rename) and older checkpoints are deleted only after it, so a
process killed at any moment leaves the previous checkpoint whole.

Several processes (jax.distributed, MultiWorkerMirroredStrategy): the chief alone writes
the file, and renames it into place only once every other process has marked its part
complete (bert_tf.training.checkpoint_parts), so a `ckpt-N.h5` is always a complete
checkpoint. A write that fails is one line (bert_tf.training.checkpoint_errors).

model_dir may be remote (bert_tf.utils.files): the .h5 is uploaded under a temporary
name and renamed there (an input position of an earlier version, beside it, is
downloaded for a resume).

Orbax (orbax-checkpoint; Keras 3.14's OrbaxCheckpoint callback) is not used: it requires
JAX and TensorStore even where only TensorFlow trains; its directory of TensorStore
arrays would be a second format beside the `ckpt-N.h5` that runs, the exporter and
--init_checkpoint read; Keras's callback serves `Model.fit`, which this trainer does not
use. What it brings (background writes, a commit by rename, several hosts) is done here.

Model directories of older versions hold TensorFlow checkpoints (`ckpt-N.index`); the
TensorFlow engine resumes from them (its reader, Engine.legacy_checkpoints:
tf_engine.legacy_checkpoints) and from then on writes the portable format; the JAX
engine refuses them in one line.
"""

import functools
import os
import queue
import re
import threading
from typing import List, Optional, Sequence

import keras

from bert_tf.checkpoints import portable
from bert_tf.checkpoints import portable_restore
from bert_tf.checkpoints import readable
from bert_tf.checkpoints import restore
from bert_tf.checkpoints import snapshots
from bert_tf.training import checkpoint_errors
from bert_tf.training import checkpoint_parts
from bert_tf.training import engine as engine_lib
from bert_tf.training import input_source as input_source_lib
from bert_tf.training import steps
from bert_tf.utils import background as background_lib
from bert_tf.utils import errors
from bert_tf.utils import storage_deadline
from bert_tf.utils import files

_LEGACY_INDEX = re.compile(r"^ckpt-(\d+)\.index$")
# The temporary name of a `ckpt-N.h5` being written (bert_tf.utils.files.temporary_name).
_UNFINISHED = re.compile(r"^\.ckpt-\d+\.h5\.tmp-[0-9a-f]+$")
# The storage calls of one checkpoint write may take storage_deadline.WRITE_BOUND_S in all,
# their retries included, plus the time its bytes take at this rate (bytes per second),
# before the run stops (remote model_dir, fsspec route).
MIN_UPLOAD_RATE = 10e6


def newest_legacy_checkpoint(model_dir: str, names: Optional[Sequence[str]] = None
                             ) -> Optional[str]:
  """The prefix of the highest-step TensorFlow checkpoint in model_dir (by name), or
  None; `names`: model_dir's listing, where the caller has it."""
  names = files.listdir(model_dir) if names is None else names
  steps = [int(m.group(1)) for m in map(_LEGACY_INDEX.match, names) if m]
  return os.path.join(model_dir, f"ckpt-{max(steps)}") if steps else None


class CheckpointSaver:
  """Writes, finds and restores the checkpoints of one model_dir for an engine.

  Args:
    model_dir: where the checkpoints go.
    max_to_keep: how many of the newest checkpoints are kept.
    engine: the run's engine (its variables and processes).
    background: write each checkpoint on a background thread (trainer.async_checkpoints;
      the attribute of that name may change between saves).
    input_source: the training input whose position each checkpoint holds (none: no
      position is written).
  """

  def __init__(self, model_dir: str, max_to_keep: int, engine: engine_lib.Engine,
               background: bool = True,
               input_source: Optional[input_source_lib.InputSource] = None):
    self.model_dir = model_dir
    self.max_to_keep = max_to_keep
    self.engine = engine
    self.input_source = input_source
    self.background = background
    self._writes = background_lib.BackgroundJob("checkpoint-writer")
    self._snapshot: Optional[snapshots.Snapshot] = None
    # The checkpoint `latest` read and verified last, for `restore` to read no more.
    self._verified: Optional[snapshots.Snapshot] = None
    # The paths of the checkpoints committed since `committed` was last asked; filled
    # by the thread that commits them.
    self._committed: "queue.SimpleQueue[str]" = queue.SimpleQueue()
    # The newest checkpoint known whole: restored from or committed by this run.
    self.newest_committed: Optional[str] = None
    # Set when a process of the run is lost: its parts will not come.
    self._parts_lost = threading.Event()
    # model_dir's names as this saver last listed them, less those it deleted since:
    # what the saves of a run that holds model_dir's lock delete from (no other run
    # writes there meanwhile), with a listing afresh after each commit (other processes'
    # parts). None: list afresh (forget_listing).
    self._names: Optional[List[str]] = None

  def latest(self) -> Optional[str]:
    """The checkpoint to resume from: the newest `ckpt-N.h5` that reads in full with
    valid checksums (damaged newer ones are skipped with a warning naming them and the
    array that fails), or a TensorFlow checkpoint of an older version where its step
    is higher; None when model_dir holds neither. A save being written is waited for
    first. What it read is kept for `restore`, which then reads the file no more."""
    self.wait()
    names = files.listdir(self.model_dir)  # one listing: a round trip on remote storage
    self._names = list(names)
    self._verified = None
    found = restore.newest_readable_portable(self.model_dir, names, self._read)
    legacy = newest_legacy_checkpoint(self.model_dir, names)
    if legacy and (found is None
                   or restore.step_in_name(legacy) > restore.step_in_name(found)):
      return self._legacy_reader().newest_readable(self.model_dir) or found
    return found

  def _legacy_reader(self):
    """The engine's reader of the TensorFlow checkpoints older versions wrote
    (Engine.legacy_checkpoints).

    Raises:
      UserError: an engine that cannot read them (one line).
    """
    reader = self.engine.legacy_checkpoints
    if reader is None:
      raise errors.UserError(
          f"{self.model_dir} holds TensorFlow checkpoints (ckpt-N.index) of an older "
          "version: resume it once on the TensorFlow engine (runtime.backend=tensorflow), "
          "which continues in the portable format (ckpt-N.h5) that every engine reads")
    return reader

  def _read(self, path: str) -> None:
    """Reads and verifies the checkpoint at `path`, keeping it for `restore`."""
    self._verified = portable.read(path)

  def restore(self, checkpoint: str, weights_only: bool = False) -> int:
    """Restores the model's items, optimizer, step and random state from
    `checkpoint` (see `latest`), and hands its input position to the input source;
    returns its step. With `weights_only` (an evaluation), the model's items and the
    step alone: a checkpoint without optimizer state (tools/convert_checkpoint.py's)
    evaluates too.

    Raises:
      UnreadableCheckpointError: the checkpoint is damaged (naming it and what fails).
    """
    content, self._verified = self._verified, None
    position = None
    model = self.engine.model
    if not checkpoint.endswith(portable.SUFFIX):
      if weights_only:
        restore.restore_items(checkpoint, model.trained_items, tuple(model.trained_items))
        step = restore.step_in_name(checkpoint)
      else:
        step = self._legacy_reader().restore_trainer(self.engine, checkpoint)
    else:
      if content is None or content.source != checkpoint:
        try:
          content = portable.read(checkpoint)
        except portable.DamagedCheckpointError as e:
          raise readable.UnreadableCheckpointError(str(e)) from None
      # The content is this restore's alone: the variables may take its arrays.
      portable_restore.restore_items(content, model.trained_items, tuple(model.trained_items),
                                     hand_over=True)
      if weights_only:  # a model-only checkpoint (converted) has its step in its name
        step = restore.step_in_name(checkpoint) if content.step is None else content.step
      else:
        step = portable_restore.restore_trainer_state(
            content, self.engine.checkpoint_state(), steps.seed_states(model),
            hand_over=True)
        position = content.position
    if self.input_source is not None:
      self.input_source.saved_position = position
    self.engine.step = step
    self.newest_committed = checkpoint
    return step

  def save(self) -> str:
    """Saves the checkpoint of the engine's current step; returns its path.

    On the calling (training) thread: waits for the previous save (raising its
    CheckpointWriteError), copies the arrays and the input position to host memory
    (chief) and passes a barrier named after the step, which every process reaches
    with the same step. The rest is `_write`'s, on the background thread (inline when
    background is off).
    """
    self.wait()
    engine = self.engine
    step = engine.step
    path = portable.path_for_step(self.model_dir, step)
    optimizer_state = engine.checkpoint_state()
    content = None
    if engine.placement.is_chief:
      position = self.input_source.position(step) if self.input_source else None
      content = snapshots.snapshot(engine.model.trained_items, optimizer_state,
                                  step=step, random_state=steps.seed_states(engine.model),
                                  backend=keras.backend.backend(), reuse=self._snapshot,
                                  position=position)
      # Its memory is filled again by the next save, once this one is written.
      self._snapshot = content
    try:
      with storage_deadline.answer_within(storage_deadline.WRITE_BOUND_S):
        files.make_dirs(self.model_dir)
        if content is not None:
          # Room first (at most max_to_keep checkpoints, this one included): a rerun in
          # a full folder would otherwise fail at the same save.
          self.make_room()
    except Exception as e:  # pylint: disable=broad-except
      if not checkpoint_errors.storage_failure(e):
        raise
      raise self._failure(path, content, e) from e
    marker = checkpoint_parts.part_marker(path, engine.placement.process_index)
    if marker and files.exists(marker):  # left by a save of this step that was cut off
      files.remove(marker)
    engine.processes.barrier(f"checkpoint of step {step}")
    job = functools.partial(self._write, path, content, marker)
    if self.background:
      self._writes.start(job)
    else:
      job()
      engine.processes.barrier(f"checkpoint of step {step} written")
    return path

  def make_room(self) -> None:
    """Deletes what a save deletes before it writes (the checkpoints beyond the newest
    max_to_keep - 1, never the newest committed one), now: a training run does it
    before it writes anything, so that a rerun on a full disk has room for its lock,
    params.yaml and summaries too. It deletes from the saver's last listing of
    model_dir where it has one (see forget_listing)."""
    self._delete_old(keep=max(self.max_to_keep - 1, 1))

  def forget_listing(self) -> None:
    """Makes the next deletion list model_dir afresh: called when the run takes or
    gives up model_dir's lock (what it listed may have changed since)."""
    self._names = None

  def committed(self) -> List[str]:
    """The checkpoints whose write has been committed since the last call, oldest
    first: a save's path once its .h5 is in place (on the chief; on other processes once
    their part is), right after `save` where it writes on the training thread."""
    paths = []
    while not self._committed.empty():
      paths.append(self._committed.get_nowait())
    return paths

  @property
  def writing(self) -> bool:
    """Whether a save is being written in the background."""
    return self._writes.running

  def wait(self) -> None:
    """Returns once no save is being written.

    Raises:
      CheckpointWriteError: the last save failed (naming its path and why).
    """
    self._writes.wait()

  def _write(self, path: str, content: Optional[snapshots.Snapshot],
             marker: Optional[str]) -> None:
    """Commits the checkpoint at `path`: marks this process's part complete (`marker`,
    processes other than the chief), and on the chief (`content`) waits for every
    other process's marker, writes the .h5 under a temporary name and renames it, then
    deletes the checkpoints beyond max_to_keep."""
    try:
      with storage_deadline.answer_within(storage_deadline.WRITE_BOUND_S):
        if marker:
          files.write_lines(marker, checkpoint_parts.part_marker_lines(
              self.engine.placement.process_index))
      if content is not None:
        checkpoint_parts.wait_for_parts(path, self.engine.placement.process_count,
                                        self._parts_lost)
        size = sum(a.nbytes for a in content.arrays.values())
        with storage_deadline.answer_within(storage_deadline.WRITE_BOUND_S
                                         + size / MIN_UPLOAD_RATE):
          portable.write(path, content)
          self._commit(path)
          self.forget_listing()  # listed afresh: the other processes' parts are there
          self._delete_old()
      else:
        self._commit(path)
    except checkpoint_errors.CheckpointWriteError:
      raise
    except Exception as e:  # pylint: disable=broad-except
      if not checkpoint_errors.storage_failure(e):
        raise
      raise self._failure(path, content, e) from e

  def _commit(self, path: str) -> None:
    """Records `path` as committed (reported by `committed`), before anything after
    the write (deleting old checkpoints) can fail."""
    self.newest_committed = path
    self._committed.put(path)

  def _failure(self, path: str, content: Optional[snapshots.Snapshot],
               error: BaseException) -> checkpoint_errors.CheckpointWriteError:
    """The CheckpointWriteError of a failed write of `path` (checkpoint_errors.write_failure)."""
    return checkpoint_errors.write_failure(path, content, error, self.model_dir,
                                           self.max_to_keep, self.newest_committed)

  def stop_waiting_for_parts(self) -> None:
    """Makes a write that waits for other processes' parts fail now (a process of the
    run was lost)."""
    self._parts_lost.set()

  def _delete_old(self, keep: Optional[int] = None) -> None:
    """Deletes the checkpoints beyond the newest `keep` (default max_to_keep) with their
    input positions, never the newest committed one, and the temporary files of
    checkpoints whose writing a killed process left unfinished (the chief writes one at
    a time: none of them is being written now); from the saver's listing of model_dir,
    or one listing where it has none."""
    names, self._names = self._names, None  # None until the deletions are done
    if names is None:
      names = files.listdir(self.model_dir)
    keep = self.max_to_keep if keep is None else keep
    deleted = set()
    for path in portable.checkpoints_in(self.model_dir, names)[keep:]:
      if path == self.newest_committed:
        continue
      files.remove(path)
      deleted.add(os.path.basename(path))
      # Its input positions and markers (`ckpt-N.input*`), from the same listing.
      sidecar = os.path.basename(portable.input_prefix(path))
      for name in names:
        if name.startswith(sidecar):
          files.remove(os.path.join(self.model_dir, name))
          deleted.add(name)
    for name in names:
      if _UNFINISHED.match(name):
        files.remove(os.path.join(self.model_dir, name))
        deleted.add(name)
    self._names = [name for name in names if name not in deleted]
