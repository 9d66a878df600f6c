"""A Google Cloud Storage emulator (the `gcp-storage-emulator` package, extra `test`) on
127.0.0.1, for tests of remote paths: `running()` starts it on a free port with one
bucket, waits (bounded) until it answers, and stops it. Clients reach it through
STORAGE_EMULATOR_HOST (`environment()`), which gcsfs honours.
"""

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from typing import Dict, Iterator

BUCKET = "bert-tf-test"
_START_TIMEOUT_S = 30


def available() -> bool:
  """Whether the emulator and gcsfs are installed (the tests skip otherwise)."""
  return all(importlib.util.find_spec(name) is not None
             for name in ("gcp_storage_emulator", "gcsfs"))


def free_port() -> int:
  """A port of 127.0.0.1 that was free a moment ago."""
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def environment(host: str) -> Dict[str, str]:
  """The variables that send gcsfs to the emulator at `host` (and skip the bucket-type
  probe that an emulator cannot answer)."""
  return {"STORAGE_EMULATOR_HOST": host, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}


@contextlib.contextmanager
def running(bucket: str = BUCKET) -> Iterator[str]:
  """Yields the emulator's address (`http://127.0.0.1:PORT`), holding `bucket`, in memory.

  Raises:
    RuntimeError: it did not answer within 30 s (its output in the message).
  """
  port = free_port()
  # Its request log goes to a file: a pipe nobody reads would fill and stall it.
  log = tempfile.TemporaryFile()
  process = subprocess.Popen(
      [sys.executable, "-m", "gcp_storage_emulator", "start", "--host=127.0.0.1",
       f"--port={port}", "--in-memory", f"--default-bucket={bucket}"],
      stdout=log, stderr=subprocess.STDOUT)
  try:
    deadline = time.time() + _START_TIMEOUT_S
    while True:
      try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        break
      except OSError:
        if process.poll() is not None or time.time() > deadline:
          process.kill()
          process.wait()
          log.seek(0)
          raise RuntimeError("The storage emulator did not start: "
                             + log.read().decode(errors="replace")[-2000:])
        time.sleep(0.1)
    yield f"http://127.0.0.1:{port}"
  finally:
    process.terminate()
    try:
      process.wait(timeout=10)
    except subprocess.TimeoutExpired:
      process.kill()
      process.wait()
    log.close()
