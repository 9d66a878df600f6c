"""Why a checkpoint write failed, in one line (bert_tf.training.checkpointing).

A write that storage refuses (full, gone, refusing), or whose other processes' parts did
not come, raises CheckpointWriteError on the training thread, naming the checkpoint's
path, why (on a full disk: how much the checkpoint needed, the space left and
trainer.max_to_keep) and the checkpoint a rerun resumes from. Any other error of a write
is a bug and raised as it is.
"""

import errno
import shutil
from typing import Optional

from bert_tf.checkpoints import snapshots
from bert_tf.utils import errors
from bert_tf.utils import storage_deadline
from bert_tf.utils import files


class CheckpointWriteError(errors.UserError, OSError):
  """A checkpoint could not be written (storage full, gone or refusing), or the other
  processes' parts did not come; the message names its path."""


def _disk_full(error: BaseException) -> bool:
  """Whether `error` (or an error it came from) says the device has no space left."""
  while error is not None:
    if getattr(error, "errno", None) == errno.ENOSPC or "No space left" in str(error):
      return True
    error = error.__cause__ or error.__context__
  return False


def storage_failure(error: BaseException) -> bool:
  """Whether `error` is storage failing a write (a CheckpointWriteError then), not a
  bug: an OSError, a user error, or a full disk however reported (h5py reports one met
  while closing the file as a RuntimeError)."""
  return isinstance(error, (OSError, errors.UserError)) or _disk_full(error)


def _megabytes(size: int) -> str:
  return f"{size / 1e6:.{1 if size >= 1e5 else 3}f} MB"


def write_failure(path: str, content: Optional[snapshots.Snapshot], error: BaseException,
                  model_dir: str, max_to_keep: int,
                  newest_committed: Optional[str]) -> CheckpointWriteError:
  """The error of a failed write of `path` into model_dir (`content`: what the chief
  was writing, None elsewhere): why (on a full disk, how much the checkpoint needed, the
  space left and trainer.max_to_keep), and the checkpoint a rerun resumes from
  (`newest_committed`)."""
  reason = (errors.user_message(error) or storage_deadline.failure_reason(error)
            or type(error).__name__)
  if _disk_full(error):
    needed = sum(a.nbytes for a in content.arrays.values()) if content else 0
    left = ""
    if files.is_local(model_dir):
      left = f", {_megabytes(shutil.disk_usage(files.local_path(model_dir)).free)} free"
    reason = (f"the disk is full (the checkpoint needs {_megabytes(needed)}{left}): free "
              f"space, or keep fewer checkpoints (trainer.max_to_keep={max_to_keep}; "
              "a rerun deletes those beyond it before it writes)")
  resume = (f"the newest committed checkpoint is {newest_committed}: rerun the same "
            "command to resume from it" if newest_committed else
            "no checkpoint of this run was committed")
  if path == newest_committed:  # in place: what failed came after (deleting old ones)
    return CheckpointWriteError(f"Storage failed after checkpoint {path} was committed: "
                                f"{reason}; {resume}")
  return CheckpointWriteError(f"Writing checkpoint {path} failed: {reason}; {resume}")
