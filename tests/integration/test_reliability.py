"""What a run survives: SIGTERM (checkpoint, exit 0, resume), SIGKILL while a checkpoint
is written in the background (the previous one intact, a bit-exact resume), a damaged latest
checkpoint (fall back to the newest readable one, naming both) and a params.yaml that a
new configuration contradicts."""

import logging
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

from bert_tf.checkpoints import portable
from bert_tf.checkpoints import readable
from bert_tf.data.records import record_files
from bert_tf.training import params_file
from bert_tf.training import trained_model
from bert_tf.training import trainer as trainer_lib
from bert_tf.training.trainer import Trainer

import trainer_helpers

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
  damaged = os.path.join(model_dir, "ckpt-4.h5")
  _cut_in_half(damaged)

  with pytest.raises(portable.PortableCheckpointError, match=damaged):
    portable.check_readable(damaged)
  with caplog.at_level(logging.WARNING):
    trainer = Trainer(experiment, model_dir, log_fn=lambda _: None)
    trainer.initialize()
  assert trainer.restored_from == os.path.join(model_dir, "ckpt-2.h5")
  assert trainer.step == 2
  warning = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
  assert damaged in warning and os.path.join(model_dir, "ckpt-2.h5") in warning

  caplog.clear()
  with caplog.at_level(logging.WARNING):
    trained_model.model_from_checkpoint(experiment, model_dir)
  assert damaged in caplog.text
  # Asked for by name, the damaged checkpoint is an error naming its file.
  with pytest.raises(portable.PortableCheckpointError, match=damaged):
    trained_model.model_from_checkpoint(experiment, damaged)


def test_params_yaml_is_kept_when_the_restore_fails_or_the_shapes_differ(tmp_path):
  model_dir = str(tmp_path / "run")
  _train_to_four(model_dir)
  params = os.path.join(model_dir, params_file.PARAMS_FILE)
  before = open(params).read()

  wider = trainer_helpers.tiny_experiment(
      steps=6, model=dict(encoder=dict(trainer_helpers.TINY_ENCODER, hidden_size=48)))
  with pytest.raises(params_file.ParamsMismatchError,
                     match=r"model\.encoder\.hidden_size: 32 in params\.yaml, now 48"):
    trainer_lib.run_experiment(wider, model_dir, log_fn=lambda _: None)
  assert open(params).read() == before

  for name in ("ckpt-2", "ckpt-4"):
    _cut_in_half(os.path.join(model_dir, f"{name}.h5"))
  longer = trainer_helpers.tiny_experiment(steps=6)
  with pytest.raises(readable.UnreadableCheckpointError, match="ckpt-2.h5"):
    trainer_lib.run_experiment(longer, model_dir, log_fn=lambda _: None)
  assert open(params).read() == before

  fresh_dir = str(tmp_path / "fresh")
  _train_to_four(fresh_dir)
  smaller_batch = trainer_helpers.tiny_experiment(steps=6, batch=4)
  with pytest.raises(params_file.ParamsMismatchError, match="train_data.global_batch_size"):
    trainer_lib.run_experiment(smaller_batch, fresh_dir, log_fn=lambda _: None)
  # Steps may change on resume.
  params_file.check_params_match(longer, fresh_dir, params_file.recorded_params(fresh_dir))
  # An explicit replace_params accepts a change that the checkpoint can still restore.
  with_dropout = trainer_helpers.tiny_experiment(
      steps=6, model=dict(encoder=dict(trainer_helpers.TINY_ENCODER, dropout_rate=0.1)))
  with pytest.raises(params_file.ParamsMismatchError, match="model.encoder.dropout_rate"):
    trainer_lib.run_experiment(with_dropout, fresh_dir, log_fn=lambda _: None)
  trainer_lib.run_experiment(with_dropout, fresh_dir, log_fn=lambda _: None,
                             replace_params=True)
  fresh_params = os.path.join(fresh_dir, params_file.PARAMS_FILE)
  assert yaml.safe_load(open(fresh_params))["model"]["encoder"]["dropout_rate"] == 0.1
  # A new batch size cannot use the checkpointed iterator (it holds batches of 8): the
  # input position is found by skipping instead.
  lines = []
  trainer_lib.run_experiment(
      trainer_helpers.tiny_experiment(steps=8, batch=4, model=dict(
          encoder=dict(trainer_helpers.TINY_ENCODER, dropout_rate=0.1))),
      fresh_dir, log_fn=lines.append, replace_params=True)
  assert any("skipped the 6 consumed batches" in line for line in lines), lines


# On JAX here; on TensorFlow with two workers, one of them signalled
# (tests/training/test_strategies.py), which takes the one-process path's steps and more.
@pytest.mark.parametrize("backend", ["jax"])
def test_sigterm_saves_a_checkpoint_exits_0_and_the_rerun_resumes_from_it(tmp_path, backend):
  config = tmp_path / "tiny.yaml"
  config.write_text(yaml.safe_dump(trainer_helpers.tiny_experiment_dict(
      steps=100000, trainer=dict(steps_per_loop=1, checkpoint_interval=50000,
                                 summary_interval=1000, log_interval=1))))
  model_dir = str(tmp_path / "run")
  args = [sys.executable, _TOOL, f"--config_file={config}", f"--model_dir={model_dir}",
          f"--backend={backend}"]
  env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
  env["TF_CPP_MIN_LOG_LEVEL"] = "2"
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
  # The signal named as received, on either engine.
  saved = [line for line in output.splitlines() if line.startswith("Received SIGTERM")]
  assert saved, output[-3000:]
  path = portable.checkpoints_in(model_dir)[0]
  assert path in saved[0]
  step = portable.step_of(path)
  assert 3 <= step < 100000

  rerun = subprocess.run(args + ["--params_override=trainer.train_steps=" + str(step + 2)],
                         capture_output=True, text=True, env=env, cwd=_ROOT, timeout=240)
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  assert f"Resumed from {path} at step {step}" in rerun.stdout
  assert portable.checkpoints_in(model_dir)[0].endswith(f"ckpt-{step + 2}.h5")


def _record_offsets(path):
  """Byte offsets at which the records of an uncompressed TFRecord file start."""
  offsets, offset = [], 0
  with open(path, "rb") as f:
    data = f.read()
  while offset < len(data):
    offsets.append(offset)
    length = int.from_bytes(data[offset:offset + 8], "little")
    offset += 8 + 4 + length + 4
  return offsets


def _corrupt_record(path, index):
  """Flips a byte inside record `index`'s data (its CRC no longer holds); returns the
  byte offset of that data (after the record's 12-byte length header), where TensorFlow
  says the record breaks."""
  offset = _record_offsets(path)[index]
  with open(path, "r+b") as f:
    f.seek(offset + 8 + 4 + 5)
    byte = f.read(1)
    f.seek(offset + 8 + 4 + 5)
    f.write(bytes([byte[0] ^ 0xFF]))
  return offset + 12


def _record_experiment(path, steps, **train_data):
  import pretraining_fixtures as fx  # pylint: disable=g-import-not-at-top
  if not os.path.exists(path):
    fx.write_record_file(path, num_documents=40)
  # Records in file order (one file, no shuffling), so the corrupt one comes at a known step.
  return trainer_helpers.tiny_experiment(
      seq=32, predictions=5, steps=steps,
      train_data=dict(format="tfrecord", input_path=path, shuffle_buffer_size=1,
                      **train_data),
      trainer=dict(steps_per_loop=1, summary_interval=1, log_interval=1,
                   checkpoint_interval=100, max_to_keep=3))


def test_validate_inputs_fails_before_training_naming_file_and_offset(tmp_path):
  path = str(tmp_path / "pretrain.tfrecord")
  experiment = _record_experiment(path, steps=10, validate_inputs=True)
  offset = _corrupt_record(path, len(_record_offsets(path)) - 2)
  model_dir = str(tmp_path / "run")
  with pytest.raises(record_files.CorruptRecordError,
                     match=f"train_data: .*{path} at byte offset {offset}"):
    trainer_lib.run_experiment(experiment, model_dir, log_fn=lambda _: None)
  assert not portable.checkpoints_in(model_dir)


def test_validate_inputs_passes_intact_files_and_checks_gzip_ones(tmp_path):
  import pretraining_fixtures as fx  # pylint: disable=g-import-not-at-top
  plain, packed = str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord.gz")
  fx.write_record_file(plain, num_documents=5)
  fx.write_record_file(packed, num_documents=5, gzip=True)
  assert record_files.validate_record_files(plain) == 1
  assert record_files.validate_record_files(packed, "GZIP") == 1
  with open(packed, "r+b") as f:
    f.truncate(os.path.getsize(packed) - 20)
  with pytest.raises(record_files.CorruptRecordError, match="b.tfrecord.gz"):
    record_files.validate_record_files(packed, "GZIP")


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_sigkill_while_a_checkpoint_is_written_keeps_the_previous_one_and_resumes_bit_exactly(
    tmp_path, backend):
  config = trainer_helpers.write_dropout_experiment(tmp_path, steps=8, max_to_keep=10)
  env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
  env["TF_CPP_MIN_LOG_LEVEL"] = "2"

  def flags(model_dir):
    return [f"--config_file={config}", f"--model_dir={model_dir}", f"--backend={backend}"]

  whole = str(tmp_path / "whole")
  done = subprocess.run([sys.executable, _TOOL] + flags(whole), capture_output=True,
                        text=True, env=env, cwd=_ROOT, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]

  # The write of ckpt-4.h5 is slowed (tests/checkpoint_hooks_main.py); the run is killed
  # once its temporary file is there.
  killed = tmp_path / "killed"
  hooks = os.path.join(_ROOT, "tests", "checkpoint_hooks_main.py")
  proc = subprocess.Popen([sys.executable, hooks, "slow_write", "4", "0.5"] + flags(killed),
                          env=env, cwd=_ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
  deadline = time.time() + 300
  try:
    while not (killed.exists() and any(name.startswith(".ckpt-4.h5.tmp-")
                                       for name in os.listdir(killed))):
      assert proc.poll() is None and time.time() < deadline
      time.sleep(0.02)
  finally:
    proc.kill()
    proc.wait()
  assert [os.path.basename(p) for p in portable.checkpoints_in(str(killed))] == ["ckpt-2.h5"]
  portable.check_readable(str(killed / "ckpt-2.h5"))

  rerun = subprocess.run([sys.executable, _TOOL] + flags(killed), capture_output=True,
                         text=True, env=env, cwd=_ROOT, timeout=300)
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  assert f"Resumed from {killed / 'ckpt-2.h5'} at step 2" in rerun.stdout
  # The killed write's temporary file is deleted once the rerun commits a checkpoint.
  assert not [name for name in os.listdir(killed) if ".tmp-" in name]
  for name in ("ckpt-2.h5", "ckpt-8.h5"):
    a = portable.arrays(os.path.join(whole, name))
    b = portable.arrays(str(killed / name))
    assert a.keys() == b.keys()
    for key in a:
      np.testing.assert_array_equal(a[key], b[key], err_msg=f"{name}: {key}")
