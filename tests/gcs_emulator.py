"""A Google Cloud Storage emulator (the `gcp-storage-emulator` package, extra `test`) on
127.0.0.1, for tests of remote paths: `running()` starts it on a free port with one
bucket, waits (bounded) until it answers, and stops it. Clients reach it through
STORAGE_EMULATOR_HOST (`environment()`), which gcsfs honours.

It answers GCS's generation preconditions (`ifGenerationMatch`, which model_dir locks
use), which the emulator alone ignores. It keeps its objects in memory, or on disk under
a folder (`running(directory=...)`, for objects of gigabytes: the benchmarks'). Its
bucket keeps no deleted objects (the
emulator keeps each one for 7 days by default, as GCS does: a run that replaces its
checkpoints would hold every one). On disk, each chunk of an upload is appended to the
file: the emulator itself reads
and writes the whole upload again for each chunk, 166 GB written for one 4 GB upload
in gcsfs's 50 MiB chunks.
"""

import contextlib
from http import HTTPStatus
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Dict, Iterator, Optional

BUCKET = "bert-tf-test"
_START_TIMEOUT_S = 30
# The emulator process serving each address `running` yielded (`kill` stops one).
_PROCESSES: Dict[str, subprocess.Popen] = {}


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
def running(bucket: str = BUCKET, directory: Optional[str] = None,
            log_path: Optional[str] = None) -> Iterator[str]:
  """Yields the emulator's address (`http://127.0.0.1:PORT`), holding `bucket`.

  Args:
    bucket: the bucket it holds.
    directory: where it stores its objects (an existing folder, left for the caller to
      delete); None: in memory.
    log_path: a file to write its output to, one line per request it answers
      (bench.checkpoint_io.logged_requests reads it); None: a temporary file.

  Raises:
    RuntimeError: it did not answer within 30 s (its output in the message).
  """
  port = free_port()
  # Its request log goes to a file: a pipe nobody reads would fill and stall it.
  log = open(log_path, "w+b") if log_path else tempfile.TemporaryFile()
  storage = ["--in-memory"] if directory is None else []
  command = [sys.executable, os.path.abspath(__file__)]
  if directory is not None:
    command.append(f"--data-dir={directory}")
  process = subprocess.Popen(
      command + ["start", "--host=127.0.0.1", f"--port={port}", *storage,
                 f"--default-bucket={bucket}"],
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
    host = f"http://127.0.0.1:{port}"
    _keep_no_deleted_objects(host, bucket)
    _PROCESSES[host] = process
    yield host
  finally:
    _PROCESSES.pop(f"http://127.0.0.1:{port}", None)
    process.terminate()
    try:
      process.wait(timeout=10)
    except subprocess.TimeoutExpired:
      process.kill()
      process.wait()
    log.close()


def kill(host: str) -> None:
  """Kills (SIGKILL) the emulator serving `host`, as storage lost mid-run."""
  _PROCESSES[host].kill()
  _PROCESSES[host].wait()


@contextlib.contextmanager
def serving_this_process(log_path: Optional[str] = None) -> Iterator[tuple]:
  """Yields (environment(), a gcsfs file system) with the emulator running (its request
  log in `log_path`, if given) and this process's gcsfs sent to it (os.environ, restored
  after); skips the test where the emulator or gcsfs is not installed."""
  import pytest  # pylint: disable=g-import-not-at-top
  if not available():
    pytest.skip("needs gcp-storage-emulator and gcsfs (extras test and gcs)")
  with running(log_path=log_path) as host:
    variables = environment(host)
    os.environ.update(variables)
    import gcsfs  # pylint: disable=g-import-not-at-top
    try:
      yield variables, gcsfs.GCSFileSystem(skip_instance_cache=True)
    finally:
      for key in variables:
        os.environ.pop(key, None)



def _keep_no_deleted_objects(host: str, bucket: str) -> None:
  """Turns the bucket's soft delete off: deleted objects go at once."""
  request = urllib.request.Request(
      f"{host}/storage/v1/b/{bucket}", method="PATCH",
      data=json.dumps({"softDeletePolicy": {"retentionDurationSeconds": "0"}}).encode(),
      headers={"Content-Type": "application/json"})
  with urllib.request.urlopen(request, timeout=10) as response:
    response.read()


def _serve(argv) -> None:
  """Runs the emulator's command line `argv`, answering GCS's generation preconditions
  (`_honour_generation_preconditions`) and, on disk, appending uploads
  (`_append_resumable_uploads`)."""
  # Before the server module takes its handlers from the objects module.
  _honour_generation_preconditions()
  if "--in-memory" not in argv:
    _append_resumable_uploads()
  from gcp_storage_emulator import __main__ as emulator_main  # pylint: disable=g-import-not-at-top
  emulator_main.main(argv)


def _honour_generation_preconditions() -> None:
  """Makes uploads, deletes and metadata patches conditional on `ifGenerationMatch` as
  GCS does (0: only where no object exists; 412 Precondition Failed otherwise), which
  the emulator ignores."""
  # pylint: disable=g-import-not-at-top
  from gcp_storage_emulator.exceptions import NotFound
  from gcp_storage_emulator.handlers import objects

  def conditional(handler, object_name):
    def checked(request, response, storage, *args, **kwargs):
      wanted = request.query.get("ifGenerationMatch")
      if wanted:
        try:
          generation = str(storage.get_file_obj(request.params["bucket_name"],
                                                object_name(request))["generation"])
        except NotFound:
          generation = "0"
        if generation != wanted[0]:
          response.status = HTTPStatus.PRECONDITION_FAILED
          response.json({"error": {"code": 412, "message": "Precondition Failed"}})
          return None
      return handler(request, response, storage, *args, **kwargs)
    return checked

  def uploaded_name(request):
    if "name" in request.query:
      return request.query["name"][0]
    data = request.data
    if isinstance(data, dict):
      return (data.get("meta") or data).get("name")
    return None

  objects.insert = conditional(objects.insert, uploaded_name)
  for name in ("delete", "patch"):
    setattr(objects, name, conditional(getattr(objects, name),
                                       lambda request: request.params["object_id"]))


def _append_resumable_uploads() -> None:
  """Appends each chunk of a resumable upload to its file on disk, so that an upload
  costs its size once."""
  # pylint: disable=g-import-not-at-top,protected-access
  from gcp_storage_emulator import storage
  from gcp_storage_emulator.exceptions import BadRequest

  def add_to_resumable_upload(self, file_id, content, total_size=None, expected_start=None):
    path = self._store._disk_path(self._object_path(storage.RESUMABLE_DIR,
                                                    self.safe_id(file_id)))
    path.parent.mkdir(parents=True, exist_ok=True)
    size = path.stat().st_size if path.exists() else 0
    if expected_start is not None and expected_start != size:
      raise BadRequest(f"Invalid Content-Range start: expected {size}, got {expected_start}")
    with open(path, "ab") as f:
      f.write(content or b"")
    size += len(content or b"")
    if total_size is None or size < total_size:
      return None
    return path.read_bytes()[:total_size]

  storage.Storage.add_to_resumable_upload = add_to_resumable_upload


if __name__ == "__main__":
  _serve(sys.argv[1:])
