"""bert_tf.training.jax_engine.coordinator: jax.distributed's coordination service in a
process of its own, which listens until process 0 stops it, outlives a lost process 0
by its grace and no longer, and refuses a port another program holds, in one line."""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from bert_tf.training.jax_engine import coordinator
from bert_tf.utils import errors
from gcs_emulator import free_port


def _gone(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return True
  return False


def _ends_within(pid: int, seconds: float) -> bool:
  deadline = time.monotonic() + seconds
  while time.monotonic() < deadline:
    if _gone(pid):
      return True
    time.sleep(0.2)
  return False


def test_the_service_listens_until_stopped():
  port = free_port()
  child = coordinator.start(f"127.0.0.1:{port}", 2, 10, 5, grace_s=5)
  try:
    assert coordinator._port_in_use(port)  # pylint: disable=protected-access
    assert child.poll() is None
  finally:
    coordinator.stop(child)
  assert child.poll() is not None and not coordinator._port_in_use(port)  # pylint: disable=protected-access


def _process_0_with_service(grace_s: int, release: bool = False):
  """(process, pid of its service): a process that starts a service (and `release`s
  it), then sleeps."""
  port = free_port()
  process = subprocess.Popen(
      [sys.executable, "-c",
       "import time; from bert_tf.training.jax_engine import coordinator; "
       f"child = coordinator.start('127.0.0.1:{port}', 2, 10, 5, grace_s={grace_s}); "
       f"{'coordinator.release(child); ' if release else ''}"
       "print(child.pid, flush=True); time.sleep(600)"],
      stdout=subprocess.PIPE, text=True)
  return process, int(process.stdout.readline())


def _kill(pid: int) -> None:
  if not _gone(pid):
    os.kill(pid, signal.SIGKILL)


def test_a_service_whose_process_0_is_gone_ends_after_its_grace():
  parent, child_pid = _process_0_with_service(grace_s=3)
  parent.send_signal(signal.SIGKILL)
  parent.wait()
  killed_at = time.monotonic()
  try:
    time.sleep(1)
    assert not _gone(child_pid)  # it serves the others while they stop
    assert _ends_within(child_pid, 10)
    assert time.monotonic() - killed_at >= 3
  finally:
    _kill(child_pid)


def test_a_port_another_program_holds_is_refused_in_one_line_after_the_grace():
  with socket.socket() as holder:
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    with pytest.raises(errors.UserError,
                       match=f"port {port} of the coordinator address 127.0.0.1:{port} "
                             "stays taken: another program holds it"):
      coordinator.start(f"127.0.0.1:{port}", 2, 10, 5, grace_s=1)


def test_a_released_service_ends_with_its_process_0():
  parent, child_pid = _process_0_with_service(grace_s=60, release=True)
  try:
    time.sleep(1)
    assert not _gone(child_pid)  # released, it still serves its living process 0
  finally:
    parent.send_signal(signal.SIGKILL)
    parent.wait()
  try:
    assert _ends_within(child_pid, 5)
  finally:
    _kill(child_pid)
