"""tools/train.py on both engines refuses or warns before a silently wrong run: a vocab of
another size than the model's is one error line naming both sizes; raw task files
without tensorflow-text are one line; neither writes anything into --model_dir. A short
run whose warm-up and checkpoint interval outlast it warns one line each, and a resumed
run whose larger train_steps changes the decay names both rates."""

import os
import subprocess
import sys

import pytest
import yaml

import finetuning_helpers
import paths
import trainer_helpers

pytestmark = pytest.mark.integration

TRAIN_TOOL = os.path.join(paths.ROOT, "tools", "train.py")
# Runs tools/train.py with tensorflow_text unimportable.
_WITHOUT_TF_TEXT = ("import runpy, sys; sys.modules['tensorflow_text'] = None; "
                    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
BACKENDS = ["tensorflow", "jax"]


def _train(backend, experiment_path, model_dir, *flags, without_tf_text=False):
  env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
  env["TF_CPP_MIN_LOG_LEVEL"] = "2"
  prefix = ["-c", _WITHOUT_TF_TEXT] if without_tf_text else []
  return subprocess.run(
      [sys.executable, *prefix, TRAIN_TOOL, f"--experiment={experiment_path}",
       f"--model_dir={model_dir}", f"--backend={backend}", *flags],
      env=env, capture_output=True, text=True, timeout=600, cwd=paths.ROOT)


def _tsv_experiment(tmp_path, vocab_size):
  vocab = finetuning_helpers.write_vocab(tmp_path / "vocab.txt")
  tsv = tmp_path / "train.tsv"
  tsv.write_text("sentence\tlabel\nthe cat sat\t1\nthe dog ran\t0\n" * 8, encoding="utf-8")
  data = {"format": "tsv", "input_path": str(tsv)}
  experiment = finetuning_helpers.tiny_experiment(
      {"name": "sentence_prediction", "num_classes": 2}, data, data, vocab_size=vocab_size,
      vocab_file=vocab)
  path = tmp_path / "tsv.yaml"
  experiment.save(str(path))
  return str(path)


def _error_line(result):
  lines = [line for line in result.stderr.splitlines() if line.startswith("train: error:")]
  assert result.returncode == 1 and len(lines) == 1, result.stdout[-2000:] + result.stderr[-3000:]
  return lines[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_vocab_of_another_size_is_one_error_line_naming_both_and_writes_nothing(
    tmp_path, backend):
  model_dir = tmp_path / "run"
  line = _error_line(_train(backend, _tsv_experiment(tmp_path, 30522), model_dir))
  assert "has 100 tokens" in line and "model.encoder.vocab_size is 30522" in line
  assert not model_dir.exists()


@pytest.mark.parametrize("backend", BACKENDS)
def test_raw_files_without_tensorflow_text_are_one_line_and_write_nothing(tmp_path, backend):
  model_dir = tmp_path / "run"
  line = _error_line(_train(backend, _tsv_experiment(tmp_path, 100), model_dir,
                            without_tf_text=True))
  assert "needs tensorflow-text" in line
  assert not model_dir.exists()


@pytest.mark.parametrize("backend", BACKENDS)
def test_short_run_warns_once_per_setting_and_a_resumed_run_names_both_rates(
    tmp_path, backend):
  path = tmp_path / "tiny.yaml"
  path.write_text(yaml.safe_dump(trainer_helpers.tiny_experiment_dict(
      steps=4, optimizer={"warmup_steps": 100},
      trainer={"checkpoint_interval": 100, "summary_interval": 100})))
  model_dir = tmp_path / "run"
  first = _train(backend, str(path), model_dir)
  assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
  warnings = [l for l in first.stdout.splitlines() if l.startswith("Warning:")]
  assert len(warnings) == 3, first.stdout
  assert "optimizer.warmup_steps 100" in warnings[0]
  assert "trainer.checkpoint_interval 100" in warnings[1]
  assert "trainer.summary_interval 100 is longer" in warnings[2]
  resumed = _train(backend, str(path), model_dir,
                   "--params_override=optimizer.warmup_steps=2,trainer.checkpoint_interval=2,"
                   "trainer.summary_interval=2,trainer.train_steps=8")
  assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
  warnings = [l for l in resumed.stdout.splitlines() if l.startswith("Warning:")]
  assert len(warnings) == 1, resumed.stdout
  assert "at step 4 the rate is now" in warnings[0]
  assert "optimizer.warmup_steps 100 -> 2" in warnings[0]
  assert "trainer.train_steps 4 -> 8" in warnings[0]
