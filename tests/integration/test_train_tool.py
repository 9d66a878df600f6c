"""Tests of tools/train.py and of experiment resolution: named experiments, config
files, overrides, flag shorthands, params.yaml, and resuming after SIGKILL."""

import os
import subprocess
import sys

import pytest
import yaml

from bert_tf import configs
from bert_tf.training import experiments

import trainer_helpers

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TOOL = os.path.join(_ROOT, "tools", "train.py")
_SIZES = ("tiny", "mini", "small", "medium", "base", "large")


def test_every_size_has_a_pretraining_experiment_and_a_model_config():
  names = experiments.registered_experiments()
  for size in _SIZES:
    config = experiments.resolve_experiment(f"pretraining_bert_{size}")
    layers, hidden, heads = configs.ENCODER_SIZES[size]
    assert (config.model.encoder.num_layers, config.model.encoder.hidden_size,
            config.model.encoder.num_attention_heads) == (layers, hidden, heads)
    assert config.task.name == "pretraining" and f"pretraining_bert_{size}" in names
    model_file = os.path.join(experiments.MODELS_DIR, f"bert_{size}.yaml")
    assert experiments.experiment_from_yaml(model_file).model.encoder == (
        config.model.encoder)


def test_config_files_merge_in_order_then_overrides_then_flags():
  config = experiments.resolve_experiment(
      "pretraining_bert_tiny", [os.path.join(experiments.MODELS_DIR, "bert_base.yaml")],
      "trainer.train_steps=7,optimizer.learning_rate=2e-5",
      experiments.runtime_overrides(distribution_strategy="mirrored",
                                    mixed_precision_dtype="mixed_bfloat16",
                                    jit_compile=True))
  assert config.model.encoder.num_layers == 12
  assert config.trainer.train_steps == 7 and config.optimizer.learning_rate == 2e-5
  assert config.runtime.mixed_precision_dtype == "mixed_bfloat16"
  assert config.runtime.jit_compile is True


def test_a_flag_contradicting_params_override_is_an_error():
  with pytest.raises(configs.ConfigError, match="runtime.distribution_strategy"):
    experiments.resolve_experiment(
        "pretraining_bert_tiny", (), "runtime.distribution_strategy=one_device",
        experiments.runtime_overrides(distribution_strategy="mirrored"))


def test_unknown_experiment_is_an_error_listing_the_registered_ones():
  with pytest.raises(configs.ConfigError, match="pretraining_bert_tiny"):
    experiments.resolve_experiment("pretraining_bert_tinyy")


def _write_config(tmp_path, **kwargs):
  path = tmp_path / "tiny.yaml"
  path.write_text(yaml.safe_dump(trainer_helpers.tiny_experiment_dict(**kwargs)))
  return str(path)


def _run_tool(args, timeout=300):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  return subprocess.run([sys.executable, _TOOL] + args, capture_output=True, text=True,
                        env=env, timeout=timeout, cwd=_ROOT)


def test_tool_help_explains_the_flags():
  result = _run_tool(["--helpfull"], timeout=120)
  assert result.returncode == 0, result.stderr  # help asked for is no failure
  for flag in ("--experiment", "--config_file", "--params_override", "--model_dir",
               "--mode", "--distribution_strategy", "--mixed_precision_dtype",
               "--jit_compile", "--init_checkpoint"):
    assert flag in result.stdout


def test_eval_mode_takes_the_training_settings_from_the_run_s_params_yaml(tmp_path):
  """--mode=eval with the experiment and the evaluation's settings alone: the training
  batch, sequence length and steps come from MODEL_DIR/params.yaml (they are not
  repeated, and differ from the experiment's); params.yaml stays as the training wrote it."""
  model_dir = str(tmp_path / "run")
  train = _run_tool([
      "--experiment=pretraining_bert_tiny", f"--model_dir={model_dir}",
      "--params_override=train_data.format=dummy,train_data.global_batch_size=8,"
      "train_data.seq_length=16,train_data.max_predictions_per_seq=2,"
      "trainer.train_steps=2,trainer.steps_per_loop=2,runtime.distribution_strategy=one_device"])
  assert train.returncode == 0, train.stderr[-3000:]
  params_path = os.path.join(model_dir, "params.yaml")
  with open(params_path, "rb") as f:
    trained = f.read()
  evaluate = _run_tool([
      "--experiment=pretraining_bert_tiny", "--mode=eval", f"--model_dir={model_dir}",
      "--params_override=eval_data.format=dummy,eval_data.global_batch_size=4,"
      "eval_data.seq_length=16,eval_data.max_predictions_per_seq=2"])
  assert evaluate.returncode == 0, evaluate.stderr[-3000:]
  assert "Done (eval)" in evaluate.stdout
  saved = experiments.experiment_from_yaml(params_path)
  assert saved.train_data.global_batch_size == 8 and saved.trainer.train_steps == 2
  # The evaluation leaves params.yaml as the training wrote it.
  with open(params_path, "rb") as f:
    assert f.read() == trained
