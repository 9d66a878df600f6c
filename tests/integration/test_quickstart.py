"""The quickstart, end to end at toy size: every stage runs and reports."""

import os
import subprocess
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow  # Seven stages, each a fresh process importing TensorFlow.
def test_quickstart_runs_every_stage_and_queries_the_export(tmp_path):
  output_dir = tmp_path / "quickstart"
  result = subprocess.run(
      [sys.executable, os.path.join(_ROOT, "tools", "quickstart.py"),
       f"--output_dir={output_dir}", "--train_steps=20", "--dupe_factor=1",
       "--min_baseline_ratio=0"],
      capture_output=True, text=True, timeout=900, check=False)
  assert result.returncode == 0, result.stdout + result.stderr
  for stage in range(1, 8):
    assert f"[{stage}/7]" in result.stdout
  assert "x the unigram baseline" in result.stdout
  assert result.stdout.count("[MASK] ->") >= 4
  assert (output_dir / "export" / "1" / "saved_model.pb").exists()
  assert os.listdir(output_dir / "model" / "eval")
  assert "Quickstart done" in result.stdout


def test_quickstart_refuses_to_replace_a_folder_it_did_not_write(tmp_path):
  (tmp_path / "precious.txt").write_text("keep me", encoding="utf-8")
  result = subprocess.run(
      [sys.executable, os.path.join(_ROOT, "tools", "quickstart.py"),
       f"--output_dir={tmp_path}"], capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode != 0
  assert "was not written by the quickstart" in result.stdout + result.stderr
  assert (tmp_path / "precious.txt").read_text(encoding="utf-8") == "keep me"
