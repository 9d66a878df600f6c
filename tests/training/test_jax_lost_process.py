"""How a JAX process of a several-process run learns that another stopped answering
(bert_tf.training.jax_engine.devices): heartbeats in jax.distributed's key-value store
(a fake store here) name the process whose counter stopped, the run's failed collective
takes that name, and where no error of the run takes it the process ends itself with
the run's one line. (Four processes with one SIGKILLed:
tests/integration/test_jax_process_lost.py.)"""

import threading

import pytest

from bert_tf.training.jax_engine import devices

_GLOO = ("UNKNOWN: Gloo AllGather failed: [external/gloo/gloo/transport/tcp/pair.cc:538] "
         "Read error [127.0.0.1]:25320: Connection reset by peer")


class _Store:
  """jax.distributed's key-value store, with process `stalled` beating once only."""

  def __init__(self, stalled):
    self.values = {}
    self.stalled = stalled
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
        if process != self.stalled or beat == 1:
          self.key_value_set(f"bert_tf/alive/{process}", str(beat))
      stop.wait(0.02)


@pytest.fixture(name="watched")
def _watched(monkeypatch):
  """A fresh loss record, short timeouts, exit handlers and process ends recorded."""
  monkeypatch.setattr(devices, "_LOSS", devices._Loss())  # pylint: disable=protected-access
  monkeypatch.setattr(devices, "HEARTBEAT_TIMEOUT_S", 0.5)
  monkeypatch.setattr(devices, "HEARTBEAT_EVERY_S", 0.02)
  monkeypatch.setattr(devices, "TAKE_WAIT_S", 2.0)
  at_exit, ended = [], []
  monkeypatch.setattr(devices.atexit, "register", at_exit.append)
  monkeypatch.setattr(devices.errors, "end_process", ended.append)
  store, stop = _Store(stalled=2), threading.Event()
  threads = [threading.Thread(target=store.beat_others, args=(4, stop), daemon=True),
             threading.Thread(target=devices._watch_heartbeats,  # pylint: disable=protected-access
                              args=(store, 0, 4), daemon=True)]
  for thread in threads:
    thread.start()
  yield at_exit, ended, threads[1]
  stop.set()


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
