"""tools/train.py --backend=jax where `import tensorflow` fails, as on a GPU machine with
JAX alone: pretraining from create_pretraining_data's records with RoBERTa-style dynamic
masks (drawn on the host, their position checkpointed) trains, evaluates, checkpoints,
is killed (SIGKILL) and resumes bit-exactly (every array of the last checkpoint equal to
an uninterrupted run's). The training runs in a process whose `sys.modules["tensorflow"]`
is None. The files' own masks and GLUE records, read from a bucket, are killed and
resumed the same way in tests/integration/test_remote_storage.py.
"""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

import paths
import pretraining_fixtures
from bert_tf.checkpoints import portable

pytestmark = pytest.mark.integration

TRAIN_TOOL = os.path.join(paths.ROOT, "tools", "train.py")
STEPS = 12
KILL_AFTER = 6
# Runs tools/train.py with TensorFlow unimportable.
_TENSORFLOW_FREE = ("import runpy, sys; sys.modules['tensorflow'] = None; "
                    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")


def _env():
  env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
  env["TF_CPP_MIN_LOG_LEVEL"] = "2"
  return env


def _command(config, model_dir):
  return [sys.executable, "-c", _TENSORFLOW_FREE, TRAIN_TOOL, f"--experiment={config}",
          f"--model_dir={model_dir}", "--backend=jax", "--mode=train_and_eval"]


def _train(config, model_dir):
  result = subprocess.run(_command(config, model_dir), env=_env(), capture_output=True,
                          text=True, timeout=900, cwd=paths.ROOT)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  return result.stdout


def _killed_and_resumed(config, model_dir):
  """Starts the training, SIGKILLs it once ckpt-KILL_AFTER.h5 exists, reruns it."""
  process = subprocess.Popen(_command(config, model_dir), env=_env(), cwd=paths.ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  deadline = time.time() + 600
  while not os.path.exists(os.path.join(model_dir, f"ckpt-{KILL_AFTER}.h5")):
    assert process.poll() is None and time.time() < deadline
    time.sleep(0.02)
  process.send_signal(signal.SIGKILL)
  process.wait()
  assert not os.path.exists(os.path.join(model_dir, f"ckpt-{STEPS}.h5"))
  return _train(config, model_dir)


def _config(directory, name, sections):
  """A tiny experiment with dropout, a checkpoint every 2 steps, as YAML."""
  data = dict(sections)
  data["model"] = dict(data.get("model", {}), encoder=dict(
      vocab_size=100, hidden_size=32, num_layers=2, num_attention_heads=2,
      intermediate_size=64, max_position_embeddings=64, dropout_rate=0.1,
      attention_dropout_rate=0.1))
  data["optimizer"] = dict(learning_rate=1e-3, warmup_steps=2)
  data["trainer"] = dict(train_steps=STEPS, steps_per_loop=2, checkpoint_interval=2,
                         summary_interval=2, log_interval=2, validation_interval=STEPS,
                         max_to_keep=10)
  path = os.path.join(str(directory), f"{name}.yaml")
  with open(path, "w", encoding="utf-8") as f:
    yaml.safe_dump(data, f)
  return path


def _check(config, directory):
  whole = os.path.join(str(directory), "whole")
  stdout = _train(config, whole)
  assert stdout.splitlines()[0].startswith("Keras backend jax")
  assert any(line.startswith("Evaluation at step 12") for line in stdout.splitlines())
  killed = os.path.join(str(directory), "killed")
  resumed = _killed_and_resumed(config, killed)
  assert f"Resumed from {killed}/ckpt-{KILL_AFTER}.h5 at step {KILL_AFTER}" in resumed
  a = portable.arrays(os.path.join(whole, f"ckpt-{STEPS}.h5"))
  b = portable.arrays(os.path.join(killed, f"ckpt-{STEPS}.h5"))
  assert a.keys() == b.keys()
  assert any(key.startswith("random_state/") for key in a)  # dropout was on
  for key in a:
    np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_pretraining_with_dynamic_masks_runs_and_resumes_bit_exactly_without_tensorflow(
    tmp_path):
  records = str(tmp_path / "pretrain.tfrecord")
  pretraining_fixtures.write_record_file(records, num_documents=60)
  data = dict(format="tfrecord", input_path=records, global_batch_size=8, seq_length=32,
              max_predictions_per_seq=5, dynamic_masking=True,
              whole_word_masking=True)
  config = _config(tmp_path, "pretraining", {
      "task": {"name": "pretraining"}, "train_data": data,
      "tokenizer": {"vocab_file": pretraining_fixtures.write_vocab(tmp_path),
                    "allow_smaller_vocab": True},  # The tiny model has 100 rows.
      "eval_data": dict(data, is_training=False, drop_remainder=False)})
  _check(config, tmp_path)
