"""What a run survives: SIGTERM (checkpoint, exit 0, resume), a damaged latest
checkpoint (fall back to the newest readable one, naming both) and a params.yaml that a
new configuration contradicts."""

import logging
import os
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf
import yaml

from bert_tf.checkpoints import restore
from bert_tf.export import exporter
from bert_tf.training import trainer as trainer_lib
from bert_tf.training.trainer import Trainer

import trainer_helpers

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TOOL = os.path.join(_ROOT, "tools", "train.py")


def _train_to_four(model_dir, **kwargs):
  """ckpt-2 and ckpt-4 in model_dir."""
  experiment = trainer_helpers.tiny_experiment(steps=4, **kwargs)
  trainer_lib.run_experiment(experiment, model_dir, log_fn=lambda _: None)
  return experiment


def _cut_in_half(path):
  size = os.path.getsize(path)
  with open(path, "r+b") as f:
    f.truncate(size // 2)


def test_damaged_latest_checkpoint_is_named_and_training_and_export_use_the_one_before(
    tmp_path, caplog):
  model_dir = str(tmp_path / "run")
  experiment = _train_to_four(model_dir)
  damaged = os.path.join(model_dir, "ckpt-4.data-00000-of-00001")
  _cut_in_half(damaged)

  with pytest.raises(restore.UnreadableCheckpointError, match=damaged):
    restore.check_readable(os.path.join(model_dir, "ckpt-4"))
  with caplog.at_level(logging.WARNING):
    trainer = Trainer(experiment, model_dir, log_fn=lambda _: None)
    trainer.initialize()
  assert trainer.restored_from == os.path.join(model_dir, "ckpt-2")
  assert int(trainer.step.numpy()) == 2
  warning = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
  assert damaged in warning and os.path.join(model_dir, "ckpt-2") in warning

  caplog.clear()
  with caplog.at_level(logging.WARNING):
    exporter.model_from_checkpoint(experiment, model_dir)
  assert damaged in caplog.text
  # Asked for by name, the damaged checkpoint is an error naming its file.
  with pytest.raises(restore.UnreadableCheckpointError, match=damaged):
    exporter.model_from_checkpoint(experiment, os.path.join(model_dir, "ckpt-4"))


def test_params_yaml_is_kept_when_the_restore_fails_or_the_shapes_differ(tmp_path):
  model_dir = str(tmp_path / "run")
  _train_to_four(model_dir)
  params = os.path.join(model_dir, trainer_lib.PARAMS_FILE)
  before = open(params).read()

  wider = trainer_helpers.tiny_experiment(
      steps=6, model=dict(encoder=dict(trainer_helpers.TINY_ENCODER, hidden_size=48)))
  with pytest.raises(trainer_lib.ParamsMismatchError,
                     match=r"model\.encoder\.hidden_size: 32 in params\.yaml, now 48"):
    trainer_lib.run_experiment(wider, model_dir, log_fn=lambda _: None)
  assert open(params).read() == before

  for name in ("ckpt-2", "ckpt-4"):
    _cut_in_half(os.path.join(model_dir, f"{name}.data-00000-of-00001"))
  longer = trainer_helpers.tiny_experiment(steps=6)
  with pytest.raises(restore.UnreadableCheckpointError, match="ckpt-2.data"):
    trainer_lib.run_experiment(longer, model_dir, log_fn=lambda _: None)
  assert open(params).read() == before

  fresh_dir = str(tmp_path / "fresh")
  _train_to_four(fresh_dir)
  smaller_batch = trainer_helpers.tiny_experiment(steps=6, batch=4)
  with pytest.raises(trainer_lib.ParamsMismatchError, match="train_data.global_batch_size"):
    trainer_lib.run_experiment(smaller_batch, fresh_dir, log_fn=lambda _: None)
  trainer_lib.check_params_match(longer, fresh_dir)  # Steps may change on resume.
  # An explicit replace_params accepts a change that the checkpoint can still restore.
  with_dropout = trainer_helpers.tiny_experiment(
      steps=6, model=dict(encoder=dict(trainer_helpers.TINY_ENCODER, dropout_rate=0.1)))
  with pytest.raises(trainer_lib.ParamsMismatchError, match="model.encoder.dropout_rate"):
    trainer_lib.run_experiment(with_dropout, fresh_dir, log_fn=lambda _: None)
  trainer_lib.run_experiment(with_dropout, fresh_dir, log_fn=lambda _: None,
                             replace_params=True)
  fresh_params = os.path.join(fresh_dir, trainer_lib.PARAMS_FILE)
  assert yaml.safe_load(open(fresh_params))["model"]["encoder"]["dropout_rate"] == 0.1
  # A new batch size cannot use the checkpointed iterator (it holds batches of 8): the
  # input position is found by skipping instead.
  lines = []
  trainer_lib.run_experiment(
      trainer_helpers.tiny_experiment(steps=8, batch=4, model=dict(
          encoder=dict(trainer_helpers.TINY_ENCODER, dropout_rate=0.1))),
      fresh_dir, log_fn=lines.append, replace_params=True)
  assert any("skipped the 6 consumed batches" in line for line in lines), lines


def test_sigterm_saves_a_checkpoint_exits_0_and_the_rerun_resumes_from_it(tmp_path):
  config = tmp_path / "tiny.yaml"
  config.write_text(yaml.safe_dump(trainer_helpers.tiny_experiment_dict(
      steps=100000, trainer=dict(steps_per_loop=1, checkpoint_interval=50000,
                                 summary_interval=1000, log_interval=1))))
  model_dir = str(tmp_path / "run")
  args = [sys.executable, _TOOL, f"--config_file={config}", f"--model_dir={model_dir}"]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env, cwd=_ROOT)
  lines = []
  deadline = time.time() + 240
  try:
    for line in proc.stdout:
      lines.append(line)
      if "step 3" in line or time.time() > deadline:
        break
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=120)
  finally:
    if proc.poll() is None:
      proc.kill()
  output = "".join(lines) + rest
  assert proc.returncode == 0, output[-3000:]
  saved = [line for line in output.splitlines() if line.startswith("Received SIGTERM")]
  assert saved, output[-3000:]
  prefix = tf.train.latest_checkpoint(model_dir)
  assert prefix is not None and prefix in saved[0]
  step = int(prefix.rsplit("-", 1)[1])
  assert 3 <= step < 100000

  rerun = subprocess.run(args + ["--params_override=trainer.train_steps=" + str(step + 2)],
                         capture_output=True, text=True, env=env, cwd=_ROOT, timeout=240)
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  assert f"Resumed from {prefix} at step {step}" in rerun.stdout
  assert tf.train.latest_checkpoint(model_dir).endswith(f"ckpt-{step + 2}")
