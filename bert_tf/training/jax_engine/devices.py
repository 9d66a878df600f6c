"""The devices a JAX run trains on, from the same runtime section as a TensorFlow run.

runtime.distribution_strategy keeps its meaning on JAX, so that one YAML runs on
either engine:
  one_device             the first local device;
  mirrored               data parallel over every local device of this one process;
  multi_worker_mirrored  data parallel over every device of every process
                         (jax.distributed, started from Keras's KERAS_DISTRIBUTION_*
                         variables before the first computation);
  tpu                    TensorFlow's TPUStrategy has no JAX meaning: on JAX a TPU's
                         cores are devices like any other (mirrored,
                         multi_worker_mirrored).
"""

import atexit
import os
import re
import socket
import sys
import threading
import time
from typing import Callable, List, Optional

import jax
import keras

from bert_tf import configs
from bert_tf.training.jax_engine import coordinator
from bert_tf.utils import errors

_NUM_PROCESSES = "KERAS_DISTRIBUTION_NUM_PROCESSES"
_ADDRESSES = "KERAS_DISTRIBUTION_JOB_ADDRESSES"
_PROCESS_ID = "KERAS_DISTRIBUTION_PROCESS_ID"
HEARTBEAT_TIMEOUT_VARIABLE = "BERT_TF_HEARTBEAT_TIMEOUT_S"


def heartbeat_timeout_s(default: int = 30) -> int:
  """HEARTBEAT_TIMEOUT_VARIABLE's seconds where it is set (a whole number, at least 5:
  the heartbeats come every 2 s), else `default`.

  Raises:
    InputError: naming the variable, for a value that is no such number.
  """
  value = os.environ.get(HEARTBEAT_TIMEOUT_VARIABLE)
  if value is None:
    return default
  seconds = int(value) if value.strip().isdecimal() else 0
  if seconds < 5:
    raise errors.InputError(f"{HEARTBEAT_TIMEOUT_VARIABLE}: a whole number of seconds of "
                            f"at least 5, got {value!r}")
  return seconds


# How long a process of the run may go without a heartbeat before the others report it
# lost and stop: the bound within which they stop when one dies (30 s, or the seconds
# HEARTBEAT_TIMEOUT_VARIABLE gives: longer where hosts pause for longer, shorter to
# stop sooner). Each process sets its heartbeat (a counter in jax.distributed's
# key-value store) every HEARTBEAT_EVERY_S.
HEARTBEAT_TIMEOUT_S = heartbeat_timeout_s()
HEARTBEAT_EVERY_S = 2
# A process of this host whose heartbeat stopped but which still runs is slow, not lost:
# its Python is held up (a call that keeps the interpreter lock, a machine that swaps)
# while its compile or step goes on. It is waited for up to SLOW_PROCESS_S in all, then
# reported. (A process of another host cannot be looked at: it is reported after
# HEARTBEAT_TIMEOUT_S.) A process that watches finds the others silent for as long as
# it was held up itself: that time is not counted against them.
SLOW_PROCESS_S = 600
# JAX's own heartbeat timeout, longer than ours: when it passes, its client ends every
# other process with a fatal log and a C++ stack trace, which ours comes before. Its
# heartbeats are sent from threads of its own, which a Python held up does not stop:
# it ends a run only where a process or its host is gone and ours did not stop the run
# first. (Its callback cannot be set from Python: jaxlib cannot hand a Python callback
# the status, and the process ends with std::bad_cast. A client that loses the
# coordination service ends at once the same way:
# bert_tf.training.jax_engine.coordinator serves it from a process of its own, which
# outlives process 0.)
_JAX_HEARTBEAT_TIMEOUT_S = 300
# How long a process's end waits for the others at jax.distributed's shutdown barrier
# (JAX's default: 300 s), which a lost process never reaches (it ends without the
# barrier). A process that comes later than this aborts in JAX's shutdown, so it leaves
# room for the last one's end on a loaded host; in a run whose processes all end, the
# barrier waits only for the last of them.
SHUTDOWN_TIMEOUT_S = 60
# How long the report of a lost process waits for the run's own error (a collective
# that failed) to take it, before it ends the process itself (the run waits in a
# collective that never returns).
TAKE_WAIT_S = 15
# How long the coordination service outlives a lost process 0 (coordinator.start): the
# others' heartbeat timeout, their report's wait, and a margin.
SERVICE_GRACE_S = HEARTBEAT_TIMEOUT_S + 2 * TAKE_WAIT_S + 10
# A collective whose peer process is gone (gloo on CPUs: "Gloo AllGather failed: ...
# Read error [127.0.0.1]:PORT: Connection reset by peer").
_PEER_GONE = re.compile(r"Gloo \w+ failed|Connection (reset|closed) by peer|Broken pipe")
_ALIVE_KEY = "bert_tf/alive/"
# Each process's host, pid and start time (`_process_record`), to tell slow from lost.
_PROCESS_KEY = "bert_tf/process/"
# Set by each process that stops for a lost one: process 0 ends the coordination
# service (bert_tf.training.jax_engine.coordinator), whose end ends the others with a
# fatal log, so it ends last.
_STOPPED_KEY = "bert_tf/stopped/"


def check_runtime(runtime: configs.RuntimeConfig) -> None:
  """Raises ConfigError for runtime settings that have no meaning on JAX."""
  if runtime.distribution_strategy == "tpu":
    raise configs.ConfigError(
        "runtime.distribution_strategy=tpu is TensorFlow's TPUStrategy; on JAX a TPU's "
        "cores are devices like any other: use mirrored (one host) or "
        "multi_worker_mirrored (several hosts)")


def start(runtime: configs.RuntimeConfig) -> None:
  """Before JAX computes anything: splits the CPU into runtime.num_cpu_devices devices,
  and starts jax.distributed where KERAS_DISTRIBUTION_NUM_PROCESSES > 1 (its
  collectives on CPUs through gloo).

  Raises:
    ConfigError: JAX set up its devices already with another CPU split.
  """
  if runtime.num_cpu_devices > 1 and jax.config.jax_num_cpu_devices != runtime.num_cpu_devices:
    try:
      jax.config.update("jax_num_cpu_devices", runtime.num_cpu_devices)
    except RuntimeError:
      raise configs.ConfigError(
          f"runtime.num_cpu_devices={runtime.num_cpu_devices}: JAX has set up its devices "
          f"already ({jax.device_count()}); start a new process (or set "
          "XLA_FLAGS=--xla_force_host_platform_device_count=N before JAX starts)") from None
  if int(os.environ.get(_NUM_PROCESSES, "1") or 1) > 1 and not jax.distributed.is_initialized():
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    _start_distributed()


class _Loss:
  """A process of the run that stopped answering: `process` (its index; None where the
  coordination service itself is gone), `known` once seen, `taken` once the run's error
  took it; `message(lost, reason)` the run's one-line report
  (ProcessGroup.end_on_lost_process)."""

  def __init__(self):
    self.known = threading.Event()
    self.taken = threading.Event()
    self.process: Optional[int] = None
    self.reason = ""
    self.message: Optional[Callable[[str, str], str]] = None
    self.ending = threading.Event()  # this process ends normally
    self.client = None  # jax.distributed's client, and this process's index and count
    self.service = None  # process 0: the coordination service's process
    self.index = 0
    self.count = 1

  def name(self) -> str:
    return ("the coordination service beside process 0" if self.process is None
            else f"process {self.process}")

  def report(self, process: Optional[int], reason: str) -> None:
    """Records the loss; ends this process with the run's one line where the run's own
    error does not take the report within TAKE_WAIT_S."""
    self.process, self.reason = process, reason
    self.known.set()
    if self.taken.wait(TAKE_WAIT_S):
      return
    message = self.message or (lambda lost, why: f"{lost} stopped answering ({why})")
    self.stop_in_turn()
    errors.end_process(message(self.name(), self.reason))

  def stop_in_turn(self) -> None:
    """Says that this process stops; in process 0, waits (bounded) until every other
    process but the lost one has said so, then lets the coordination service end with
    it."""
    try:
      self.client.key_value_set(f"{_STOPPED_KEY}{self.index}", "1", allow_overwrite=True)
    except Exception:  # pylint: disable=broad-except
      return  # the service is gone
    if self.index != 0:
      return
    waiting = {p for p in range(1, self.count) if p != self.process}
    deadline = time.monotonic() + HEARTBEAT_TIMEOUT_S + 2 * TAKE_WAIT_S
    while waiting and time.monotonic() < deadline:
      for process in list(waiting):
        try:
          self.client.key_value_try_get(f"{_STOPPED_KEY}{process}")
          waiting.discard(process)
        except Exception:  # pylint: disable=broad-except
          pass
      time.sleep(0.2)
    if self.service is not None:
      coordinator.release(self.service)


_LOSS = _Loss()


def _process_record(pid: int) -> Optional[str]:
  """"HOST PID START" of the running process `pid` of this host (START: its start time
  in clock ticks since boot, which a later process of the same pid does not share);
  None where it is not running (gone, or a zombie) or /proc cannot tell."""
  try:
    with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
      fields = f.read().rsplit(")", 1)[1].split()
  except (OSError, IndexError):
    return None
  if fields[0] in ("Z", "X"):
    return None
  return f"{socket.gethostname()} {pid} {fields[19]}"


def _still_running(client, process: int) -> bool:
  """Whether `process` of the run runs on this host still (see SLOW_PROCESS_S)."""
  try:
    record = client.key_value_try_get(f"{_PROCESS_KEY}{process}")
  except Exception:  # pylint: disable=broad-except
    return False
  parts = str(record).split()
  return (len(parts) == 3 and parts[0] == socket.gethostname()
          and _process_record(int(parts[1])) == record)


def _watch_heartbeats(client, index: int, count: int) -> None:
  """Sets this process's heartbeat and watches the others' (a thread for the life of
  the process); reports the first process whose heartbeat stopped for
  HEARTBEAT_TIMEOUT_S (SLOW_PROCESS_S for one of this host that still runs), or the
  coordination service where it stops answering."""
  others = [p for p in range(count) if p != index]
  seen = {p: (None, time.monotonic()) for p in others}
  beat = 0
  record = _process_record(os.getpid())
  if record:
    try:
      client.key_value_set(f"{_PROCESS_KEY}{index}", record, allow_overwrite=True)
    except Exception:  # pylint: disable=broad-except
      pass  # the service is gone: the first heartbeat reports it
  last_round = time.monotonic()
  while True:
    beat += 1
    try:
      client.key_value_set(f"{_ALIVE_KEY}{index}", str(beat), allow_overwrite=True)
      now = time.monotonic()
      held_up = now - last_round - HEARTBEAT_EVERY_S
      last_round = now
      if held_up > HEARTBEAT_EVERY_S:  # this process was held up: not the others' silence
        seen = {p: (value, at + held_up) for p, (value, at) in seen.items()}
      for process in others:
        try:
          value = client.key_value_try_get(f"{_ALIVE_KEY}{process}")
        except Exception as e:  # pylint: disable=broad-except
          if "NOT_FOUND" not in str(e):
            raise
          continue  # its first heartbeat is still to come
        if value != seen[process][0]:
          seen[process] = (value, now)
    except Exception as e:  # pylint: disable=broad-except
      if not _LOSS.ending.is_set():
        _LOSS.report(None, " ".join(str(e).split())[:200])
      return
    if _LOSS.ending.is_set():
      return
    for process, (_, at) in seen.items():
      silent = time.monotonic() - at
      if silent <= HEARTBEAT_TIMEOUT_S:
        continue
      if not _still_running(client, process):
        _LOSS.report(process, f"no heartbeat for {HEARTBEAT_TIMEOUT_S} s")
        return
      if silent > SLOW_PROCESS_S:
        _LOSS.report(process, f"no heartbeat for {SLOW_PROCESS_S} s while it runs")
        return
    time.sleep(HEARTBEAT_EVERY_S)


def end_on_lost_process(message: Callable[[str, str], str]) -> None:
  """See ProcessGroup.end_on_lost_process."""
  _LOSS.message = message


def lost_process(error: BaseException) -> Optional[str]:
  """The process (`process 3`) whose loss `error` shows: a collective whose peer is
  gone, or any error once a loss is known; None otherwise. Where the collective failed
  first, waits (at most HEARTBEAT_TIMEOUT_S and a margin) for the heartbeats to name
  the process."""
  if not (_LOSS.known.is_set() or _PEER_GONE.search(str(error))):
    return None
  if not _LOSS.known.wait(HEARTBEAT_TIMEOUT_S + 2 * HEARTBEAT_EVERY_S + TAKE_WAIT_S / 2):
    return "a process"
  if not _LOSS.taken.is_set():
    _LOSS.taken.set()
    # Runs first at exit: jax.distributed's shutdown waits at a barrier the lost process
    # never reaches, then ends the process with a fatal log and a C++ stack trace.
    atexit.register(_exit_without_shutdown)
  return _LOSS.name()


def _exit_without_shutdown() -> None:
  _LOSS.stop_in_turn()
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(errors.ERROR_EXIT)  # pylint: disable=protected-access


def lost_process_reason(error: BaseException) -> str:
  """Why the loss was seen: the failed collective's words, or the missing heartbeat."""
  if _PEER_GONE.search(str(error)) or not _LOSS.known.is_set():
    return " ".join(str(error).split())[:200]
  return _LOSS.reason


def _start_distributed() -> None:
  """jax.distributed from Keras's KERAS_DISTRIBUTION_* variables (as
  keras.distribution.initialize, which has no timeouts to pass), with the bounds above.
  (The random seed every process shares is runtime.seed, set when the model is built.)"""
  address = os.environ.get(_ADDRESSES, "").split(",")[0] or None
  count = int(os.environ[_NUM_PROCESSES])
  index = int(os.environ[_PROCESS_ID]) if _PROCESS_ID in os.environ else None
  service, bind_address = None, None
  if index == 0 and address:
    service = coordinator.start(address, count, _JAX_HEARTBEAT_TIMEOUT_S, SHUTDOWN_TIMEOUT_S,
                                SERVICE_GRACE_S)
    bind_address = "127.0.0.1:0"  # process 0's own service, which no process uses
  try:
    jax.distributed.initialize(
        coordinator_address=address, num_processes=count, process_id=index,
        heartbeat_timeout_seconds=_JAX_HEARTBEAT_TIMEOUT_S,
        shutdown_timeout_seconds=SHUTDOWN_TIMEOUT_S, coordinator_bind_address=bind_address)
  except BaseException:
    if service is not None:
      coordinator.stop(service)
    raise
  from jax._src import distributed  # pylint: disable=g-import-not-at-top
  _LOSS.client, _LOSS.service = distributed.global_state.client, service
  _LOSS.index, _LOSS.count = jax.process_index(), jax.process_count()
  # Runs before JAX's own end (registered at its import): the others' heartbeats stop as
  # they end, and the service ends after jax.distributed's shutdown barrier.
  atexit.register(_end_distributed)
  threading.Thread(target=_watch_heartbeats, name="heartbeats", daemon=True,
                   args=(_LOSS.client, _LOSS.index, _LOSS.count)).start()


def _end_distributed() -> None:
  """At this process's normal end: stops watching the others' heartbeats, and in process
  0 ends the coordination service once every process passed jax.distributed's shutdown
  barrier (JAX's own shutdown, which runs after, then does nothing)."""
  _LOSS.ending.set()
  if _LOSS.service is not None:
    jax.distributed.shutdown()
    coordinator.stop(_LOSS.service)


def keep_tensorflow_off_accelerators() -> None:
  """Where TensorFlow is installed (a tf.data input runs in this process), keeps it off
  the accelerators JAX uses."""
  try:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
  except ImportError:
    return
  try:
    tf.config.set_visible_devices([], "GPU")
  except RuntimeError:
    pass  # TensorFlow initialized its devices already.


def data_parallel_devices(runtime: configs.RuntimeConfig) -> List:
  """The devices of runtime.distribution_strategy (see the module docstring).

  Raises:
    ConfigError: several processes with a strategy of one process.
  """
  strategy = runtime.distribution_strategy
  if jax.process_count() > 1 and strategy != "multi_worker_mirrored":
    raise configs.ConfigError(
        f"runtime.distribution_strategy={strategy} trains in one process, but "
        f"{jax.process_count()} processes run: use multi_worker_mirrored")
  if strategy == "one_device":
    return jax.local_devices()[:1]
  if strategy == "mirrored":
    return jax.local_devices()
  return jax.devices()


def set_distribution(devices: List) -> None:
  """Keras's DataParallel over `devices` where there are several (none for one)."""
  if len(devices) > 1:
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
  else:
    keras.distribution.set_distribution(None)
