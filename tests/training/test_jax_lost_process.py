"""How a JAX process of a several-process run learns that another stopped answering
(bert_tf.training.jax_engine.devices): heartbeats in jax.distributed's key-value store
(a fake store here) name the process whose counter stopped, the run's failed collective
takes that name, and where no error of the run takes it the process ends itself with
the run's one line. (Four processes with one SIGKILLed:
tests/integration/test_jax_process_lost.py.)"""

import os
import socket
import threading
import time

import pytest

from bert_tf.training.jax_engine import devices

_GLOO = ("UNKNOWN: Gloo AllGather failed: [external/gloo/gloo/transport/tcp/pair.cc:538] "
         "Read error [127.0.0.1]:25320: Connection reset by peer")


class _Store:
  """jax.distributed's key-value store, with process `stalled` beating once only."""

  def __init__(self, stalled):
    self.values = {}
    self.stalled = stalled
    self.paused_until = 0.0  # no process beats before (time.monotonic())
    self.lock = threading.Lock()

  def key_value_set(self, key, value, allow_overwrite=False):
    del allow_overwrite
    with self.lock:
      self.values[key] = value

  def key_value_try_get(self, key):
    with self.lock:
      if key not in self.values:
        raise RuntimeError(f"NOT_FOUND: {key}")
      return self.values[key]

  def beat_others(self, count, stop):
    beat = 0
    while not stop.is_set():
      beat += 1
      for process in range(1, count):
        if time.monotonic() < self.paused_until:
          break
        if process != self.stalled or beat == 1:
          self.key_value_set(f"bert_tf/alive/{process}", str(beat))
      stop.wait(0.02)


def _watch(monkeypatch, store, stop):
  """Starts `store`'s other processes' beats and process 0's watcher over them, with a
  fresh loss record, short timeouts, exit handlers and process ends recorded; returns
  (exit handlers, process ends, the watcher's thread)."""
  monkeypatch.setattr(devices, "_LOSS", devices._Loss())  # pylint: disable=protected-access
  monkeypatch.setattr(devices, "HEARTBEAT_TIMEOUT_S", 0.5)
  monkeypatch.setattr(devices, "HEARTBEAT_EVERY_S", 0.02)
  monkeypatch.setattr(devices, "TAKE_WAIT_S", 2.0)
  at_exit, ended = [], []
  monkeypatch.setattr(devices.atexit, "register", at_exit.append)
  monkeypatch.setattr(devices.errors, "end_process", ended.append)
  threads = [threading.Thread(target=store.beat_others, args=(4, stop), daemon=True),
             threading.Thread(target=devices._watch_heartbeats,  # pylint: disable=protected-access
                              args=(store, 0, 4), daemon=True)]
  for thread in threads:
    thread.start()
  return at_exit, ended, threads[1]


@pytest.fixture(name="watched")
def _watched(monkeypatch):
  stop = threading.Event()
  at_exit, ended, watcher = _watch(monkeypatch, _Store(stalled=2), stop)
  yield at_exit, ended, watcher
  stop.set()
  devices._LOSS.ending.set()  # pylint: disable=protected-access
  watcher.join(5)  # never left watching once this test's settings are undone
  assert not watcher.is_alive()


def test_a_collective_whose_peer_is_gone_names_the_process_whose_heartbeat_stopped(watched):
  at_exit, ended, watcher = watched
  error = ValueError(_GLOO)
  assert devices.lost_process(error) == "process 2"
  assert devices.lost_process_reason(error) == _GLOO
  watcher.join(5)
  assert not watcher.is_alive() and ended == []  # the run's error took the report
  assert len(at_exit) == 1  # its end skips jax.distributed's shutdown barrier


def test_a_loss_no_error_of_the_run_takes_ends_the_process_in_the_runs_line(watched):
  _, ended, watcher = watched
  devices.end_on_lost_process(lambda lost, reason: f"{lost} stopped answering ({reason})")
  watcher.join(10)  # the run waits in a collective that never returns
  assert ended == ["process 2 stopped answering (no heartbeat for 0.5 s)"]


def test_other_errors_are_no_lost_process(monkeypatch):
  monkeypatch.setattr(devices, "_LOSS", devices._Loss())  # pylint: disable=protected-access
  assert devices.lost_process(ValueError("Incompatible shapes: [2,3] vs. [2,4]")) is None


def test_a_normal_end_reports_no_loss_when_the_service_shuts_down(monkeypatch):
  monkeypatch.setattr(devices, "_LOSS", devices._Loss())  # pylint: disable=protected-access
  ended = []
  monkeypatch.setattr(devices.errors, "end_process", ended.append)

  class _ShutDown:
    def key_value_set(self, key, value, allow_overwrite=False):
      raise RuntimeError("UNAVAILABLE: the coordination service has shut down")

  devices._LOSS.ending.set()  # pylint: disable=protected-access
  devices._watch_heartbeats(_ShutDown(), 1, 4)  # pylint: disable=protected-access
  assert ended == [] and not devices._LOSS.known.is_set()  # pylint: disable=protected-access


def test_a_silent_process_that_still_runs_on_this_host_is_slow_not_lost(monkeypatch):
  """Process 2 stops beating (its Python held up by a long compile) but still runs on
  this host: it is waited for up to SLOW_PROCESS_S, not HEARTBEAT_TIMEOUT_S; a record
  of a process that no longer runs (another start time under its pid) is lost at once."""
  monkeypatch.setattr(devices, "SLOW_PROCESS_S", 1.5)
  for record, lost_after in ((devices._process_record(os.getpid()), 1.5),  # pylint: disable=protected-access
                             (f"{socket.gethostname()} {os.getpid()} 1", 0.5)):
    store, stop = _Store(stalled=2), threading.Event()
    store.values["bert_tf/process/2"] = record
    start = time.monotonic()
    _, ended, watcher = _watch(monkeypatch, store, stop)
    monkeypatch.setattr(devices, "TAKE_WAIT_S", 0.2)
    devices.end_on_lost_process(lambda lost, reason: f"{lost} stopped answering ({reason})")
    assert devices._LOSS.known.wait(10)  # pylint: disable=protected-access
    assert lost_after <= time.monotonic() - start < lost_after + 1.0, record
    watcher.join(10)
    stop.set()
    assert not watcher.is_alive()
    reason = ("no heartbeat for 1.5 s while it runs" if lost_after == 1.5
              else "no heartbeat for 0.5 s")
    assert ended == [f"process 2 stopped answering ({reason})"], record


def test_a_watcher_held_up_with_every_process_does_not_count_that_time_as_silence(
    monkeypatch):
  """The machine held up (swapping, suspended): every process's beats stop, the
  watcher's own too, for longer than HEARTBEAT_TIMEOUT_S, and the watcher runs again
  a moment before the others beat again: no process is reported lost."""
  store, stop = _Store(stalled=None), threading.Event()
  set_value = store.key_value_set
  held_until = [0.0]

  def held_up(key, value, allow_overwrite=False):
    if key.endswith("/0"):
      time.sleep(max(0.0, held_until[0] - time.monotonic()))
    set_value(key, value, allow_overwrite)

  store.key_value_set = held_up
  _, ended, watcher = _watch(monkeypatch, store, stop)
  monkeypatch.setattr(devices, "HEARTBEAT_TIMEOUT_S", 1.0)
  time.sleep(0.2)
  # The others stop first, the watcher sees their last beats, then it is held up too;
  # it goes on 0.3 s before them.
  store.paused_until = time.monotonic() + 2.8
  time.sleep(0.1)
  held_until[0] = time.monotonic() + 2.4
  watcher.join(3.5)
  stop.set()
  assert watcher.is_alive() and ended == [] and not devices._LOSS.known.is_set()  # pylint: disable=protected-access
  # The run's end stops the watcher, before this test's settings are undone: left
  # watching, it would find the others silent and end the test's process.
  devices._LOSS.ending.set()  # pylint: disable=protected-access
  watcher.join(5)
  assert not watcher.is_alive()


def test_the_heartbeat_timeout_comes_from_its_variable_where_set_and_a_bad_one_is_named(
    monkeypatch):
  monkeypatch.delenv(devices.HEARTBEAT_TIMEOUT_VARIABLE, raising=False)
  assert devices.heartbeat_timeout_s() == 30
  monkeypatch.setenv(devices.HEARTBEAT_TIMEOUT_VARIABLE, "120")
  assert devices.heartbeat_timeout_s() == 120
  for bad in ("soon", "0", "4", "7.5", "-10", "inf", "\u00b2"):
    monkeypatch.setenv(devices.HEARTBEAT_TIMEOUT_VARIABLE, bad)
    with pytest.raises(devices.errors.InputError,
                       match=f"^BERT_TF_HEARTBEAT_TIMEOUT_S: a whole number of seconds "
                             f"of at least 5, got '{bad}'$"):
      devices.heartbeat_timeout_s()
