"""What model_dir's run lock (bert_tf.training.run_lock) says of its holder, and whether
that holder still holds it.

The lock file, `model_dir/run.lock`, holds one JSON record: holder (the program),
host, pid, started, lease_s, a token of its own and, on storage without object
metadata, the time of its last renewal. From it come the refusal of a second run,
naming the first in one line, and the reason a lock no longer holds: its process is
gone from this host, or (remote storage) its lease ran out without renewal.
"""

import datetime
import json
import os
import socket
import sys
import time
import uuid
from typing import Optional

from bert_tf.utils import errors

LOCK_FILE = "run.lock"
# How long a remote lock that is no longer renewed holds off another run.
LEASE_S = 60.0


class ModelDirInUseError(errors.UserError):
  """Another run holds the model_dir."""


def now() -> float:
  return time.time()


def new_record(lease_s: float) -> dict:
  """The record of a lock this process takes, with a lease of `lease_s` seconds."""
  return {"holder": os.path.basename(sys.argv[0] or "python") or "python",
          "host": socket.gethostname(), "pid": os.getpid(),
          "started": now(), "lease_s": lease_s, "token": uuid.uuid4().hex}


def time_text(seconds: float) -> str:
  return datetime.datetime.fromtimestamp(seconds).isoformat(sep=" ", timespec="seconds")


def describe(record: dict) -> str:
  """"HOLDER pid P on host H since T" of a lock's content."""
  return (f"{record.get('holder', '?')} pid {record.get('pid', '?')} on host "
          f"{record.get('host', '?')} since {time_text(float(record.get('started', 0)))}")


def in_use_message(model_dir: str, record: Optional[dict]) -> str:
  """The refusal of a run whose model_dir another run holds."""
  holder = describe(record) if record else "another run"
  return (f"{model_dir} is in use by {holder} ({os.path.join(model_dir, LOCK_FILE)}): one "
          "run per model_dir; wait for it to end or use another model_dir")


def _process_gone(record: dict) -> bool:
  """Whether the lock's holder ran on this host and its process is gone."""
  if record.get("host") != socket.gethostname():
    return False
  try:
    os.kill(int(record.get("pid", 0)), 0)
  except ProcessLookupError:
    return True
  except (OSError, ValueError):
    return False
  return False


def stale_reason(record: dict, renewed: float) -> Optional[str]:
  """Why a remote lock last renewed at `renewed` no longer holds (its process is gone
  from this host, or its lease ran out); None while it holds."""
  if _process_gone(record):
    return "that process is no longer running"
  lease = float(record.get("lease_s", LEASE_S))
  if now() < renewed + lease:
    return None
  return f"its lease of {lease:.0f} s ran out {now() - renewed - lease:.0f} s ago"


def parse(content: bytes) -> Optional[dict]:
  """The record in a lock file's bytes; None where they hold none (cut short, damaged)."""
  try:
    record = json.loads(content.decode("utf-8"))
  except (UnicodeDecodeError, ValueError):
    return None
  return record if isinstance(record, dict) else None
