"""Storage lost mid-run (the GCS emulator killed under tools/train.py, on JAX without
TensorFlow and on TensorFlow): the run stops within 60 s of the loss with one error
line naming the checkpoint it could not write, why, and the newest committed
checkpoint a rerun resumes from, the one whose copy was in place when storage went
(ckpt-4.h5 or later, though deleting its temporary name failed); the summary writer's
failure is a warning, not a second error, and no traceback is printed."""

import os
import re
import subprocess
import sys
import time

import pytest

import gcs_emulator
import paths

pytestmark = pytest.mark.integration

_TRAIN_TOOL = os.path.join(paths.ROOT, "tools", "train.py")
_WITHOUT_TENSORFLOW = ("import runpy, sys; sys.modules['tensorflow'] = None; "
                       "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
# From the loss to the process's end, on either engine.
_BOUND_S = 60


@pytest.fixture(name="emulator")
def _emulator():
  with gcs_emulator.serving_this_process() as serving:
    yield serving


@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_storage_lost_mid_run_ends_within_a_minute_in_one_line_naming_the_newest_committed_checkpoint(
    emulator, tmp_path, backend):
  environment, fs = emulator
  model_dir = f"gs://{gcs_emulator.BUCKET}/run"
  config = tmp_path / "tiny.yaml"
  data = ("{format: dummy, global_batch_size: 8, seq_length: 16, "
          "max_predictions_per_seq: 4")
  config.write_text(
      "task: {name: pretraining}\n"
      "model: {encoder: {vocab_size: 100, hidden_size: 32, num_layers: 2, "
      "num_attention_heads: 2, intermediate_size: 64, max_position_embeddings: 32}}\n"
      f"train_data: {data}}}\neval_data: {data}, is_training: false}}\n"
      "trainer: {train_steps: 100000, steps_per_loop: 2, checkpoint_interval: 2, "
      "summary_interval: 2, log_interval: 2, max_to_keep: 3}\n")
  env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
  env.update(environment, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=paths.ROOT)
  start = [sys.executable, "-c", _WITHOUT_TENSORFLOW] if backend == "jax" else [sys.executable]
  proc = subprocess.Popen(
      start + [_TRAIN_TOOL, f"--experiment={config}", f"--model_dir={model_dir}",
               f"--backend={backend}"],
      env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  try:
    deadline = time.time() + 400
    committed = f"{gcs_emulator.BUCKET}/run/ckpt-4.h5"
    # Polled often: storage is lost as ckpt-4.h5's copy appears, as likely as not before
    # its temporary name is deleted.
    while not fs.exists(committed):
      assert proc.poll() is None and time.time() < deadline, proc.communicate()[1][-3000:]
      time.sleep(0.05)
      fs.invalidate_cache()
    gcs_emulator.kill(environment["STORAGE_EMULATOR_HOST"])
    lost_at = time.time()
    stdout, stderr = proc.communicate(timeout=_BOUND_S * 3)
    stopped_after = time.time() - lost_at
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  assert proc.returncode == 1, stderr[-3000:]
  assert "Traceback" not in stderr + stdout, stderr[-5000:]
  errors = [line for line in stderr.splitlines() if line.startswith("train: error:")]
  assert len(errors) == 1 and errors[0] == stderr.strip().splitlines()[-1], stderr[-3000:]
  assert re.match(rf"train: error: (Writing checkpoint {model_dir}/ckpt-\d+\.h5 failed|"
                  rf"Storage failed after checkpoint {model_dir}/ckpt-\d+\.h5 was "
                  "committed): ", errors[0]), errors
  named = re.search(r"the newest committed checkpoint is (\S+): rerun the same command to "
                    r"resume from it$", errors[0])
  assert named, errors
  # ckpt-4.h5 was whole in the bucket before the loss: it, or a later one, is named, and
  # the log said it was saved.
  assert int(re.search(r"ckpt-(\d+)\.h5$", named.group(1)).group(1)) >= 4, errors
  saved = [line.split()[-1] for line in stdout.splitlines()
           if line.startswith("Saved checkpoint")]
  assert saved[-1] == named.group(1), (errors, stdout[-2000:])
  assert "127.0.0.1" in errors[0] or "no answer within" in errors[0], errors
  assert stopped_after < _BOUND_S, (stopped_after, stderr[-3000:])
  print(f"{backend}: stopped {stopped_after:.0f} s after the storage was lost: {errors[0]}")
