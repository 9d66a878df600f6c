"""Tests of tools/convert_checkpoint.py, run as a user runs it."""

import os
import subprocess
import sys

from safetensors.numpy import load_file, save_file

from bert_tf.checkpoints import reading, writing
from checkpoint_helpers import TINY, tiny_model, write_vocab

TOOL = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools",
                    "convert_checkpoint.py")


def _run(*args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True,
                        env=env, timeout=300, check=False)


def test_tool_converts_and_prints_stages_and_a_summary_line(tmp_path):
  model = tiny_model(heads=False)
  writing.save_huggingface(model, write_vocab(tmp_path / "vocab.txt", TINY.vocab_size),
                           str(tmp_path / "hf"))
  result = _run(f"--input={tmp_path / 'hf'}", f"--output_dir={tmp_path / 'out'}")
  assert result.returncode == 0, result.stderr
  lines = result.stdout.strip().splitlines()
  assert any("Reading huggingface checkpoint" in line for line in lines)
  assert lines[-1].startswith("Converted huggingface")
  assert "encoder, 39 variables" in lines[-1]
  loaded = reading.read_checkpoint(str(tmp_path / "out"))
  assert loaded.items == ("encoder",)


def test_tool_reports_bad_input_with_exit_code_1_and_writes_nothing(tmp_path):
  writing.save_huggingface(tiny_model(), write_vocab(tmp_path / "vocab.txt", TINY.vocab_size),
                           str(tmp_path / "hf"))
  path = str(tmp_path / "hf" / "model.safetensors")
  tensors = load_file(path)
  del tensors["cls.predictions.transform.dense.bias"]
  save_file(tensors, path)
  result = _run(f"--input={tmp_path / 'hf'}", f"--output_dir={tmp_path / 'out'}")
  assert result.returncode == 1
  assert "cls.predictions.transform.dense.bias" in result.stderr
  assert not (tmp_path / "out").exists()


def test_tool_help_explains_formats():
  result = _run("--help")  # absl exits with status 1 after printing the help.
  for word in ("google_tf1", "huggingface", "bert_tf", "keras_hub", "--output_format",
               "--init_checkpoint", "BertForSequenceClassification"):
    assert word in result.stdout
