"""A process lost from a JAX run of three processes (jax.distributed on 127.0.0.1,
tools/train.py without TensorFlow, model_dir on the GCS emulator): the uninterrupted
run's process 1 held up longer than the heartbeats' timeout before its first steps (a
slow compile) is waited for, not reported lost; process 2 SIGKILLed
while the background save of ckpt-4 waits for its part, then, in the rerun, process 0
SIGKILLed while it writes ckpt-4 (the coordination service, served from a process of its
own, outlives it); every other process stops within the bound (the heartbeats' timeout,
set to HEARTBEAT_S through devices.HEARTBEAT_TIMEOUT_VARIABLE, plus slack for a loaded
machine) with one error line naming
the lost process and the checkpoint a rerun resumes from, no traceback; the rerun of
every process ends with the arrays of an uninterrupted three-process run."""

import signal
import time

import pytest

import process_helpers
from bert_tf.training.jax_engine import devices
# The emulator fixtures (_emulator needs _emulator_log) and the multi-process helpers.
from test_remote_storage import (  # pylint: disable=g-importing-member,unused-import
    _DUMMY, _bucket_and_cwd, _config, _emulator, _emulator_log, _exists, _start_hosts,
    rerun_hosts_equal)

pytestmark = pytest.mark.integration

PROCESSES = 3
STEPS = 8
KILLED = 2
# The processes' heartbeat timeout (30 s by default): how long a lost one goes unnoticed,
# and how long the held one is late beyond it.
HEARTBEAT_S = 10
# The wait for the run's own error to take the report (devices.TAKE_WAIT_S), the
# survivors' end, and a loaded machine's scheduling.
_SLACK_S = 60


def _whole_run(tmp_path, environment, fs):
  """(config, bucket, cwd): the uninterrupted three-process run of the experiment, done
  into `bucket`/whole, each checkpoint committed from the chief's arrays and the
  others' markers. Process 1's first loop starts HEARTBEAT_S + 10 s late,
  its Python held up (a slow first compile, tests/checkpoint_hooks_main.py): it is slow,
  not lost, and the run completes."""
  bucket, cwd = _bucket_and_cwd(tmp_path)
  config = _config(tmp_path, STEPS, data=dict(_DUMMY, global_batch_size=6),  # 2 rows each
                   runtime=dict(distribution_strategy="multi_worker_mirrored"))
  outputs = process_helpers.finish_all(_start_hosts(
      config, f"{bucket}/whole", cwd, environment, count=PROCESSES, held_part=1,
      hook=("held_steps", HEARTBEAT_S + 10)))
  assert not [o for o in outputs if "stopped answering" in o or "fatal" in o], outputs
  fs.invalidate_cache()
  names = {name.split("/", 2)[-1] for name in fs.find(f"{bucket}/whole")}
  # The chief writes the replicated state and the position once, each other process
  # its marker.
  assert {f"ckpt-{STEPS}.h5"} | {f"ckpt-{STEPS}.input-{p}.done" for p in range(1, PROCESSES)
                                 } <= names, names
  assert not [name for name in names if ".tmp-" in name or ".json" in name], names
  return config, bucket, cwd


def _outputs_and_stop_time(processes):
  """The outputs of `processes` (a lost one's survivors), and how long after now the
  last of them ended."""
  lost_at = time.time()
  outputs = [p.communicate(timeout=HEARTBEAT_S + 4 * _SLACK_S)[0]
             for p in processes]
  return outputs, time.time() - lost_at


def _assert_one_line_each(processes, outputs, lost: int, resume: str) -> None:
  for process, output in zip(processes, outputs):
    assert process.returncode == 1, output[-3000:]
    assert "Traceback" not in output and "fatal errors" not in output, output[-5000:]
    last = output.strip().splitlines()[-1]
    assert last.startswith(f"train: error: process {lost} stopped answering ("), last
    assert last.endswith("this run stops: rerun every process with the same command to "
                         f"resume from {resume}"), last


def test_a_lost_process_and_then_a_lost_process_0_each_stop_the_others_in_one_line_and_a_rerun_equals_an_unbroken_run(
    tmp_path, emulator):
  """Process 2 is lost while the chief's save of ckpt-4 waits for its part; the rerun
  of that run then loses process 0 while it writes ckpt-4 (the coordination service, in
  a process of its own, serves the others while they stop); neither ckpt-4 is
  committed, and a last rerun equals the unbroken run."""
  environment, fs = emulator
  environment = dict(environment, **{devices.HEARTBEAT_TIMEOUT_VARIABLE: str(HEARTBEAT_S)})
  config, bucket, cwd = _whole_run(tmp_path, environment, fs)
  killed = f"{bucket}/killed"
  processes = _start_hosts(config, killed, cwd, environment, held_part=4, count=PROCESSES,
                           held_process=KILLED)
  try:
    # Its part of step 4 is held before its marker is written, and the chief's save of
    # ckpt-4 waits for it (tests/checkpoint_hooks_main.py holds it).
    process_helpers.wait_until(processes,
                               lambda: _exists(fs, f"{killed}/ckpt-4.input-{KILLED}.done.held"))
    processes[KILLED].send_signal(signal.SIGKILL)
    outputs, stopped_after = _outputs_and_stop_time(processes[:KILLED])
  finally:
    process_helpers.kill_all(processes)
  fs.invalidate_cache()
  assert not fs.exists(f"{killed}/ckpt-4.h5")  # the killed process's part never came
  _assert_one_line_each(processes[:KILLED], outputs, KILLED, f"{killed}/ckpt-2.h5")
  assert stopped_after < HEARTBEAT_S + _SLACK_S, stopped_after
  print(f"the others stopped {stopped_after:.0f} s after process {KILLED} was killed")

  # The rerun resumes from ckpt-2; process 0 writes each array of ckpt-4 a second late,
  # the others mark their parts, and process 0 is killed.
  processes = _start_hosts(config, killed, cwd, environment, held_part=4, count=PROCESSES,
                           held_process=0, hook=("slow_write", 1))
  try:
    process_helpers.wait_until(processes, lambda: all(
        _exists(fs, f"{killed}/ckpt-4.input-{p}.done") for p in range(1, PROCESSES)))
    processes[0].send_signal(signal.SIGKILL)
    outputs, stopped_after = _outputs_and_stop_time(processes[1:])
  finally:
    process_helpers.kill_all(processes)
  fs.invalidate_cache()
  assert not fs.exists(f"{killed}/ckpt-4.h5") and fs.exists(f"{killed}/ckpt-2.h5")
  _assert_one_line_each(processes[1:], outputs, 0, f"{killed}/ckpt-2.h5")
  assert stopped_after < HEARTBEAT_S + _SLACK_S, stopped_after
  print(f"the others stopped {stopped_after:.0f} s after process 0 was killed")

  rerun_hosts_equal(config, (f"{bucket}/whole", killed), 2, cwd, (environment, fs), tmp_path,
                    count=PROCESSES)
