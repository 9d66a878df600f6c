"""One run per gs:// model_dir (bert_tf.training.run_lock) against the GCS emulator
(tests/gcs_emulator.py, which answers GCS's generation preconditions): the lock object
is created only where none exists, a second run (tools/train.py on JAX without
TensorFlow) is refused in one line naming the holder and writes nothing, and a lock
whose lease ran out is taken over with a line while its old holder learns it lost it."""

import os
import socket
import subprocess
import sys
import time

import pytest

import gcs_emulator
import paths
from bert_tf.checkpoints import portable
from bert_tf.training import lock_record
from bert_tf.training import run_lock

pytestmark = pytest.mark.integration

_TRAIN_TOOL = os.path.join(paths.ROOT, "tools", "train.py")
_WITHOUT_TENSORFLOW = ("import runpy, sys; sys.modules['tensorflow'] = None; "
                       "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")


@pytest.fixture(name="emulator")
def _emulator():
  with gcs_emulator.serving_this_process() as serving:
    yield serving


def _train(model_dir, environment, tmp_path, steps=2):
  config = tmp_path / "tiny.yaml"
  config.write_text(
      "task: {name: pretraining}\n"
      "model: {encoder: {vocab_size: 100, hidden_size: 32, num_layers: 2, "
      "num_attention_heads: 2, intermediate_size: 64, max_position_embeddings: 32}}\n"
      "train_data: {format: dummy, global_batch_size: 8, seq_length: 16, "
      "max_predictions_per_seq: 4}\n"
      "eval_data: {format: dummy, global_batch_size: 8, seq_length: 16, "
      "max_predictions_per_seq: 4, is_training: false}\n"
      f"trainer: {{train_steps: {steps}, steps_per_loop: 2, checkpoint_interval: 2, "
      "summary_interval: 2, log_interval: 2}\n")
  env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
  env.update(environment, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=paths.ROOT)
  return subprocess.run(
      [sys.executable, "-c", _WITHOUT_TENSORFLOW, _TRAIN_TOOL, f"--experiment={config}",
       f"--model_dir={model_dir}", "--backend=jax"],
      env=env, capture_output=True, text=True, timeout=600, cwd=str(tmp_path))


def test_the_emulator_creates_an_object_only_where_none_exists(emulator):
  _, fs = emulator
  path = f"{gcs_emulator.BUCKET}/precondition"
  fs.pipe_file(path, b"first", mode="create")
  with pytest.raises(FileExistsError):
    fs.pipe_file(path, b"second", mode="create")
  assert fs.cat_file(path) == b"first"


def test_a_second_run_on_a_gs_model_dir_is_refused_in_one_line_naming_the_holder(
    emulator, tmp_path):
  environment, fs = emulator
  model_dir = f"gs://{gcs_emulator.BUCKET}/held"
  with run_lock.RunLock(model_dir, log_fn=pytest.fail) as lock:
    with pytest.raises(lock_record.ModelDirInUseError, match=f"pid {os.getpid()} on host "
                       f"{socket.gethostname()} since "):
      run_lock.RunLock(model_dir).acquire()
    refused = _train(model_dir, environment, tmp_path)
    assert lock.record["token"] in fs.cat_file(f"{model_dir}/{lock_record.LOCK_FILE}").decode()
  assert refused.returncode == 1, refused.stderr[-3000:]
  errors = [line for line in refused.stderr.splitlines() if line.strip()]
  assert errors == [f"train: error: {model_dir} is in use by {lock.record['holder']} pid "
                    f"{os.getpid()} on host {socket.gethostname()} since "
                    f"{lock_record.time_text(lock.record['started'])} "
                    f"({model_dir}/{lock_record.LOCK_FILE}): one run per model_dir; wait for "
                    "it to end or use another model_dir"], refused.stderr[-3000:]
  # Given back by its holder: gone; nothing else was written.
  assert fs.ls(f"{gcs_emulator.BUCKET}/", detail=False) == []


def test_a_lock_whose_lease_ran_out_is_taken_over_and_its_holder_learns_it(
    emulator, tmp_path):
  environment, fs = emulator
  model_dir = f"gs://{gcs_emulator.BUCKET}/stale"
  stale = run_lock.RunLock(model_dir, lease_s=2.0).acquire()
  # As a killed run: no more renewals, nothing given back.
  stale._stop.set()  # pylint: disable=protected-access
  stale._renewer.join()  # pylint: disable=protected-access
  with pytest.raises(lock_record.ModelDirInUseError):
    run_lock.RunLock(model_dir).acquire()
  time.sleep(2.5)
  done = _train(model_dir, environment, tmp_path)
  assert done.returncode == 0, done.stderr[-3000:]
  took_over = [line for line in done.stdout.splitlines() if line.startswith("Took over")]
  assert len(took_over) == 1, done.stdout[-3000:]
  assert f"left by {stale.record['holder']} pid {os.getpid()}" in took_over[0]
  assert "its lease of 2 s ran out" in took_over[0]
  assert [os.path.basename(p) for p in portable.checkpoints_in(model_dir, [
      os.path.basename(n) for n in fs.ls(model_dir.replace("gs://", ""), detail=False)])] == [
          "ckpt-2.h5"]
  # The run gave the lock back; the old holder, renewing again, learns it lost it.
  assert not fs.exists(f"{model_dir}/{lock_record.LOCK_FILE}")
  with pytest.raises(lock_record.ModelDirInUseError, match="taken over by another run"):
    stale._store.renew()  # pylint: disable=protected-access


def test_a_lock_whose_process_is_gone_from_this_host_is_taken_over_before_its_lease_ends(
    emulator):
  del emulator
  model_dir = f"gs://{gcs_emulator.BUCKET}/killed"
  holder = subprocess.Popen(
      [sys.executable, "-c", "import sys, time\n"
       "from bert_tf.training import run_lock\n"
       "run_lock.RunLock(sys.argv[1]).acquire()\nprint('held', flush=True)\ntime.sleep(600)",
       model_dir], stdout=subprocess.PIPE, text=True, env={**os.environ,
                                                           "PYTHONPATH": paths.ROOT})
  try:
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(lock_record.ModelDirInUseError, match=f"pid {holder.pid} on host"):
      run_lock.RunLock(model_dir).acquire()
  finally:
    holder.kill()
    holder.wait()
  lines = []
  with run_lock.RunLock(model_dir, log_fn=lines.append):
    assert len(lines) == 1 and f"pid {holder.pid} on host {socket.gethostname()}" in lines[0]
    assert lines[0].endswith("that process is no longer running"), lines
