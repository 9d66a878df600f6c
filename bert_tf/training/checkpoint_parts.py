"""A checkpoint of several processes (bert_tf.training.checkpointing): each process's
mark that its part is complete, the chief's wait for them, and the report of a process
lost.

Several processes (jax.distributed; TensorFlow's MultiWorkerMirroredStrategy, whose
workers are numbered by tf_engine.strategies.worker_placement, the chief 0): the chief
(process 0) alone writes the replicated state and the input position, which is the same
on every process (each reads its part of the same global batches). Every process
reaches the save of the same step (a barrier named after it, which each engine checks
is the same everywhere: JAX's, or an all-gather of the name's checksum); each process
other than the chief marks its part complete (`ckpt-N.input-P.done`, holding its
process number and the CRC32C of that line), and the chief renames the .h5 into place
only once every marker is there and verifies. So a `ckpt-N.h5` is always a complete
checkpoint, and a rerun resumes from the newest one, whichever process was killed
mid-save.
"""

import threading
import time
from typing import List, Optional

import numpy as np

from bert_tf.checkpoints import checksums
from bert_tf.checkpoints import portable
from bert_tf.training import checkpoint_errors
from bert_tf.utils import errors
from bert_tf.utils import files

# Beside a checkpoint of several processes, each process's but the chief's mark that its
# part is complete: `ckpt-N.input-P.done`.
PART_DONE = ".done"
# How long the chief waits for the other processes' parts of a checkpoint.
PARTS_TIMEOUT_S = 600.0


def part_marker(checkpoint: str, process_index: int) -> Optional[str]:
  """The file process `process_index` writes once its part of `checkpoint` is complete
  (`ckpt-N.input-P.done`); None for the chief (process 0)."""
  return portable.input_prefix(checkpoint, process_index) + PART_DONE if process_index else None


def part_marker_lines(process: int) -> List[str]:
  """The lines of process `process`'s marker: its number and that line's CRC32C."""
  line = str(process)
  return [line, f"crc32c {checksums.crc32c(np.frombuffer(line.encode(), np.uint8)):08x}"]


def part_marker_verifies(marker: str, process: int) -> bool:
  """Whether the marker file `marker` is there and holds process `process`'s lines
  (one cut short or damaged is not: the part is not complete)."""
  if not files.exists(marker):
    return False
  try:
    lines = files.read_bytes(marker).decode("utf-8").split()
  except (OSError, UnicodeDecodeError):
    return False
  return " ".join(lines) == " ".join(part_marker_lines(process))


def wait_for_parts(checkpoint: str, process_count: int, lost: threading.Event) -> None:
  """Returns once every process but the chief, of `process_count`, has marked its part
  of `checkpoint` complete.

  Raises:
    CheckpointWriteError: some did not within PARTS_TIMEOUT_S (naming them), or `lost`
      is set (a process of the run was lost: its part will not come).
  """
  waiting = {p: part_marker(checkpoint, p) for p in range(1, process_count)}
  deadline = time.monotonic() + PARTS_TIMEOUT_S
  while True:
    waiting = {p: marker for p, marker in waiting.items()
               if not part_marker_verifies(marker, p)}
    if not waiting:
      return
    if lost.is_set():
      raise checkpoint_errors.CheckpointWriteError(
          f"Checkpoint {checkpoint} is not committed: a process of the run was lost")
    if time.monotonic() > deadline:
      raise checkpoint_errors.CheckpointWriteError(
          f"Checkpoint {checkpoint} is not committed: process(es) {sorted(waiting)} did "
          f"not mark their part complete within {PARTS_TIMEOUT_S:.0f} s")
    time.sleep(0.1)


def lost_process_error(model_dir: str, lost: str, reason: str) -> errors.UserError:
  """The one-line report of a run whose process `lost` stopped answering: which, why
  (`reason`), and the checkpoint every process's rerun resumes from."""
  found = portable.checkpoints_in(model_dir)
  resume = (f"rerun every process with the same command to resume from {found[0]}"
            if found else "no checkpoint was committed: a rerun starts over")
  return errors.UserError(f"{lost} stopped answering ({reason}); this run stops: {resume}")
