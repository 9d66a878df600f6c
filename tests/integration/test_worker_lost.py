"""A worker lost under MultiWorkerMirroredStrategy (two TensorFlow workers of
tools/train.py on 127.0.0.1, worker 1 SIGKILLed after a checkpoint): the survivor stops
with one error line saying which worker stopped answering and the checkpoint a rerun of
every worker resumes from, not a traceback of the aborted collective. (That a rerun
after a killed worker resumes bit-exactly: test_multi_worker_checkpoints.)"""

import os
import signal
import time

import pytest
import yaml

import process_helpers
from bert_tf.checkpoints import portable

from test_multi_worker_checkpoints import _start_workers  # pylint: disable=g-importing-member

pytestmark = pytest.mark.integration


def test_the_survivor_of_a_lost_worker_names_it_and_the_checkpoint_to_resume_from(tmp_path):
  data = dict(format="dummy", global_batch_size=8, seq_length=16, max_predictions_per_seq=4)
  config = tmp_path / "pretraining.yaml"
  config.write_text(yaml.safe_dump(dict(
      task=dict(name="pretraining"),
      model=dict(encoder=dict(vocab_size=100, hidden_size=32, num_layers=2,
                              num_attention_heads=2, intermediate_size=64,
                              max_position_embeddings=32)),
      train_data=data, eval_data=dict(data, is_training=False),
      trainer=dict(train_steps=100000, steps_per_loop=2, checkpoint_interval=2,
                   summary_interval=2, log_interval=2, max_to_keep=3),
      runtime=dict(distribution_strategy="multi_worker_mirrored", seed=7))))
  model_dir = tmp_path / "run"
  processes = _start_workers(str(config), model_dir)
  try:
    process_helpers.wait_until(processes, (model_dir / "ckpt-4.h5").exists, every=0.1)
    processes[1].send_signal(signal.SIGKILL)
    lost_at = time.time()
    output, _ = processes[0].communicate(timeout=300)
    stopped_after = time.time() - lost_at
  finally:
    process_helpers.kill_all(processes)
  assert processes[0].returncode == 1, output[-3000:]
  assert "Traceback" not in output, output[-5000:]
  last = output.strip().splitlines()[-1]
  # The newest committed (its "Saved" line may not have come before the loss).
  resume = portable.checkpoints_in(str(model_dir))[0]
  assert portable.step_of(resume) >= 4
  assert last.startswith("train: error: worker 1 "), output[-3000:]
  assert " stopped answering (" in last and "Traceback" not in last
  assert "Detected at node" not in last  # the reason, not the graph around it
  assert last.endswith(f"this run stops: rerun every process with the same command to "
                       f"resume from {resume}"), (last, output[-3000:])
  print(f"stopped {stopped_after:.0f} s after worker 1 was killed: {last}")

