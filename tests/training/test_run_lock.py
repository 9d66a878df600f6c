"""One run per model_dir on local disk (bert_tf.training.run_lock): a second run is
refused naming the first before it writes anything, a lock whose process died is taken
over with a line naming it, a finished run gives its lock back. The gs:// lock is tested
against the GCS emulator (tests/integration/test_run_lock_remote.py)."""

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from bert_tf.checkpoints import portable
from bert_tf.training import engine as engine_lib
from bert_tf.training import lock_record
from bert_tf.training import process_group
from bert_tf.training import run_lock
from bert_tf.training import trainer as trainer_lib

import test_trainer_with_fake_engine as fake
import trainer_helpers

# Takes the lock of argv[1], says so, then waits to be killed.
_HOLDER = """
import sys, time
from bert_tf.training import run_lock
run_lock.RunLock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_a_second_lock_is_refused_naming_holder_pid_host_and_start(tmp_path):
  model_dir = str(tmp_path / "run")
  with run_lock.RunLock(model_dir, log_fn=pytest.fail):
    record = json.load(open(os.path.join(model_dir, lock_record.LOCK_FILE)))
    assert record["pid"] == os.getpid() and record["host"] == socket.gethostname()
    with pytest.raises(lock_record.ModelDirInUseError) as refused:
      run_lock.RunLock(model_dir).acquire()
  message = str(refused.value)
  assert f"{model_dir} is in use by " in message
  assert f"pid {os.getpid()} on host {socket.gethostname()} since " in message
  # Given back: gone, and the next run takes it without a takeover line.
  assert not os.path.exists(os.path.join(model_dir, lock_record.LOCK_FILE))
  run_lock.RunLock(model_dir, log_fn=pytest.fail).acquire().release()


def test_the_lock_of_a_killed_process_is_taken_over_with_a_line_naming_it(tmp_path):
  model_dir = str(tmp_path / "run")
  holder = subprocess.Popen([sys.executable, "-c", _HOLDER, model_dir],
                            stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(lock_record.ModelDirInUseError, match=f"pid {holder.pid} on host"):
      run_lock.RunLock(model_dir).acquire()
  finally:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
  lines = []
  lock = run_lock.RunLock(model_dir, log_fn=lines.append).acquire()
  try:
    assert len(lines) == 1
    assert f"left by -c pid {holder.pid} on host {socket.gethostname()}" in lines[0]
    assert "no longer running" in lines[0]
    record = json.load(open(os.path.join(model_dir, lock_record.LOCK_FILE)))
    assert record["pid"] == os.getpid()
  finally:
    lock.release()


def test_a_training_run_is_refused_while_another_holds_model_dir_and_writes_nothing(
    tmp_path):
  model_dir = str(tmp_path / "run")
  with run_lock.RunLock(model_dir):
    trainer, _ = fake._trainer(model_dir)  # pylint: disable=protected-access
    with pytest.raises(lock_record.ModelDirInUseError, match=f"pid {os.getpid()}"):
      trainer.run()
    assert os.listdir(model_dir) == [lock_record.LOCK_FILE]
  trainer, _ = fake._trainer(model_dir)  # pylint: disable=protected-access
  trainer.run()
  assert portable.checkpoints_in(model_dir)
  assert not os.path.exists(os.path.join(model_dir, lock_record.LOCK_FILE))
  # Evaluation writes no checkpoint: it runs beside a training run.
  with run_lock.RunLock(model_dir):
    fake._trainer(model_dir)[0].run("eval")  # pylint: disable=protected-access


class _ChiefsFlags(process_group.ProcessGroup):
  """The processes of a run of two, seen from process 1: every process's flags say
  whether the chief was refused."""

  chief_refused = False

  def any_process(self, flag):
    return flag or self.chief_refused


class _OtherProcess(fake.FakeEngine):
  """Process 1 of 2."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.processes = _ChiefsFlags()

  @property
  def placement(self):
    return engine_lib.Placement(num_replicas=2, process_index=1, process_count=2,
                                description="process 1 of a fake engine")


@pytest.mark.parametrize("chief_refused", [False, True])
def test_processes_other_than_the_chief_share_its_lock_and_its_refusal(tmp_path,
                                                                       chief_refused):
  model_dir = str(tmp_path / "run")
  experiment = trainer_helpers.tiny_experiment(steps=2)
  task = fake.FakeTask()
  engine = _OtherProcess(experiment, task, lambda _: None)
  engine.processes.chief_refused = chief_refused
  trainer = trainer_lib.Trainer(experiment, model_dir, task=task, engine=engine,
                                log_fn=lambda _: None)
  # The lock of this run's chief, or of another run that refused it.
  with run_lock.RunLock(model_dir):
    if chief_refused:
      with pytest.raises(lock_record.ModelDirInUseError, match=f"pid {os.getpid()} on host"):
        trainer.train()
    else:
      trainer.train()
      assert trainer.step == 2
