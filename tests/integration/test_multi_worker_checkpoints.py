"""tools/train.py as two TensorFlow workers (MultiWorkerMirroredStrategy, TF_CONFIG on
127.0.0.1, CPU) writing their parts of each checkpoint into one shared local model_dir,
as clusters on NFS or GCS-fuse do (TensorFlow's own gs:// client cannot be pointed at
the GCS emulator): the chief's `ckpt-N.h5` is committed only once the other worker has
written its input position and marked it complete; a worker killed between the two
leaves the previous checkpoint the newest; the survivor stops with one error line naming
the worker that stopped answering and that checkpoint, not a traceback of the aborted
collective; and both workers resume from it, each at its own input position, to the
weights of an uninterrupted run, bit for bit.
"""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import yaml

import gcs_emulator
import paths
import process_helpers
from bert_tf.checkpoints import portable

TRAIN_TOOL = os.path.join(paths.ROOT, "tools", "train.py")
HOOKS = os.path.join(paths.ROOT, "tests", "checkpoint_hooks_main.py")
STEPS = 6
HELD = 4  # the step whose save the killed worker does not finish


def _config(directory):
  """A tiny pretraining experiment on dummy data with dropout, a checkpoint every 2
  steps, under multi_worker_mirrored; returns its YAML's path."""
  data = dict(format="dummy", global_batch_size=8, seq_length=16, max_predictions_per_seq=4)
  experiment = dict(
      task=dict(name="pretraining"),
      model=dict(encoder=dict(vocab_size=100, hidden_size=32, num_layers=2,
                              num_attention_heads=2, intermediate_size=64,
                              max_position_embeddings=32, dropout_rate=0.1)),
      train_data=data, eval_data=dict(data, is_training=False),
      optimizer=dict(learning_rate=1e-3, warmup_steps=2),
      trainer=dict(train_steps=STEPS, steps_per_loop=2, checkpoint_interval=2,
                   summary_interval=2, log_interval=2, max_to_keep=10),
      runtime=dict(distribution_strategy="multi_worker_mirrored", seed=7))
  path = os.path.join(str(directory), "pretraining.yaml")
  with open(path, "w", encoding="utf-8") as f:
    yaml.safe_dump(experiment, f)
  return path


def _start_workers(config, model_dir, held_part=None):
  """Starts the two workers; with held_part=STEP, worker 1 stops before marking its
  part of ckpt-STEP complete (tests/checkpoint_hooks_main.py)."""
  cluster = [f"127.0.0.1:{gcs_emulator.free_port()}" for _ in range(2)]
  flags = [f"--experiment={config}", f"--model_dir={model_dir}", "--backend=tensorflow"]
  processes = []
  for index in range(2):
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=paths.ROOT, TF_CONFIG=json.dumps(
        {"cluster": {"worker": cluster}, "task": {"type": "worker", "index": index}}))
    command = [sys.executable, TRAIN_TOOL] + flags
    if held_part and index == 1:
      command = [sys.executable, HOOKS, "held_part", str(held_part), "3600"] + flags
    processes.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
  return processes


def test_two_tensorflow_workers_commit_a_checkpoint_only_with_both_parts_and_resume_it_bit_exactly(
    tmp_path):
  config = _config(tmp_path)
  whole = tmp_path / "whole"
  process_helpers.finish_all(_start_workers(config, whole))
  names = set(os.listdir(whole))
  # The chief writes the replicated state and the position once, worker 1 its marker.
  assert {f"ckpt-{STEPS}.h5", f"ckpt-{STEPS}.input-1.done"} <= names, names
  assert not [name for name in names if ".tmp-" in name or ".index" in name], names

  # Worker 1 reaches the save of step HELD, then is SIGKILLed before marking its part
  # complete: the chief does not commit ckpt-HELD.h5.
  killed = tmp_path / "killed"
  processes = _start_workers(config, killed, held_part=HELD)
  try:
    deadline = time.time() + 600
    while not (killed / f"ckpt-{HELD}.input-1.done.held").exists():
      ended = [p for p in processes if p.poll() is not None]
      assert not ended and time.time() < deadline, ended and ended[0].communicate()[0][-3000:]
      time.sleep(0.05)
    processes[1].send_signal(signal.SIGKILL)
    # The survivor stops in one line naming the lost worker and the checkpoint to
    # resume from, not with a traceback of the aborted collective.
    output, _ = processes[0].communicate(timeout=300)
  finally:
    process_helpers.kill_all(processes)
  assert (killed / "ckpt-2.h5").exists()
  assert not (killed / f"ckpt-{HELD}.h5").exists()
  assert processes[0].returncode == 1, output[-3000:]
  assert "Traceback" not in output, output[-5000:]
  last = output.strip().splitlines()[-1]
  assert last.startswith("train: error: worker 1 "), output[-3000:]
  assert " stopped answering (" in last and "Detected at node" not in last, last
  assert last.endswith("this run stops: rerun every process with the same command to "
                       f"resume from {killed}/ckpt-2.h5"), (last, output[-3000:])

  outputs = process_helpers.finish_all(_start_workers(config, killed))
  for output in outputs:
    assert f"Resumed from {killed}/ckpt-2.h5 at step 2" in output, output[-3000:]
    assert "consumed batches" not in output, output[-3000:]  # its position was restored
  a = portable.arrays(str(whole / f"ckpt-{STEPS}.h5"))
  b = portable.arrays(str(killed / f"ckpt-{STEPS}.h5"))
  assert a.keys() == b.keys()
  for key in a:
    np.testing.assert_array_equal(a[key], b[key], err_msg=key)
