"""jax.distributed's coordination service in a process of its own, which process 0 of a
run starts beside itself.

jax.distributed serves the service from process 0 itself, and a client that loses the
service ends its process at once with a fatal log (which jaxlib lets no Python callback
replace). Served from a process of its own, the service outlives a lost process 0, so
that the others see it lost as any other (bert_tf.training.jax_engine.devices: a
missing heartbeat, then one line each) and stop in order. Process 0 stops the service
after jax.distributed's shutdown, or where it stops for a lost process, `release`s it
to end with it; one whose process 0 is lost keeps serving for a grace, the time the
others take to stop (devices.SERVICE_GRACE_S), then ends.

  python -m bert_tf.training.jax_engine.coordinator BIND_ADDRESS PROCESSES HEARTBEAT_S \
    SHUTDOWN_S GRACE_S
"""

import errno
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from bert_tf.utils import errors

# How long the start waits for the service to listen.
_READY_TIMEOUT_S = 60
_READY = "ready"


def _port_in_use(port: int) -> bool:
  """Whether a socket of this host holds TCP `port` (a service of an earlier run)."""
  family, host = (socket.AF_INET6, "::") if socket.has_ipv6 else (socket.AF_INET, "")
  with socket.socket(family, socket.SOCK_STREAM) as probe:
    try:
      probe.bind((host, port))
    except OSError as e:
      if e.errno == errno.EADDRINUSE:
        return True
      raise
  return False


def start(address: str, num_processes: int, heartbeat_s: int, shutdown_s: int,
          grace_s: int) -> subprocess.Popen:
  """Starts the service for `num_processes` processes on the port of `address`
  (HOST:PORT) in a process of its own, and returns once it listens; it serves `grace_s`
  on once this process is gone. An earlier run's service still on the port (its
  process 0 lost) is waited for, at most `grace_s`.

  Raises:
    UserError: the port stays taken, or the service does not start there.
  """
  port = int(address.rsplit(":", 1)[1])
  deadline = time.monotonic() + grace_s
  if _port_in_use(port):
    logging.warning("Port %d of the coordination service is taken (an earlier run's "
                    "service ends within %d s of its process 0): waiting", port, grace_s)
    while _port_in_use(port):
      if time.monotonic() > deadline:
        raise errors.UserError(
            f"port {port} of the coordinator address {address} stays taken: another "
            "program holds it; give the run another port")
      time.sleep(1)
  child = subprocess.Popen(
      [sys.executable, "-m", __name__, f"[::]:{port}", str(num_processes),
       str(heartbeat_s), str(shutdown_s), str(grace_s)],
      stdout=subprocess.PIPE, text=True, start_new_session=True)
  ready = []
  reader = threading.Thread(target=lambda: ready.append(child.stdout.readline()), daemon=True)
  reader.start()
  reader.join(_READY_TIMEOUT_S)
  if not ready or ready[0].strip() != _READY:
    child.kill()
    raise errors.UserError(f"the coordination service did not start on port {port} of "
                           f"{address} (exit status {child.poll()})")
  return child


def release(child: subprocess.Popen) -> None:
  """Lets the service end as soon as this process is gone, not `grace_s` later: every
  other process has stopped. (Ending it at once would end this process too: its client
  would lose the service.)"""
  if child.poll() is None:
    child.send_signal(signal.SIGUSR1)


def stop(child: subprocess.Popen) -> None:
  """Ends the service once every process has passed jax.distributed's shutdown."""
  if child.poll() is None:
    child.terminate()
    try:
      child.wait(10)
    except subprocess.TimeoutExpired:
      child.kill()


def _serve(bind_address: str, num_processes: int, heartbeat_s: int, shutdown_s: int,
           grace_s: int) -> None:
  """Serves until SIGTERM (the run's end), or `grace_s` after process 0 is gone."""
  from jax._src.lib import _jax  # pylint: disable=g-import-not-at-top
  parent = os.getppid()
  service = _jax.get_distributed_runtime_service(
      bind_address, num_processes, heartbeat_timeout=heartbeat_s,
      shutdown_timeout=shutdown_s)
  ended, released = threading.Event(), threading.Event()
  signal.signal(signal.SIGTERM, lambda *_: ended.set())
  signal.signal(signal.SIGUSR1, lambda *_: released.set())
  print(_READY, flush=True)
  while not ended.wait(0.5):
    if os.getppid() != parent:  # process 0 is gone
      if not released.is_set():
        ended.wait(grace_s)  # the others stop meanwhile
      os._exit(0)  # pylint: disable=protected-access
  service.shutdown()


if __name__ == "__main__":
  _serve(sys.argv[1], *map(int, sys.argv[2:6]))
