"""tools/export_saved_model.py and tools/make_serving_request.py end to end."""

import json
import os
import subprocess
import sys

import pytest

import export_helpers as helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tool(name, *args, env=None, returncode=0):
  process = subprocess.run([sys.executable, os.path.join(ROOT, "tools", name), *args],
                           capture_output=True, text=True, timeout=600, check=False, env=env)
  assert process.returncode == returncode, process.stderr[-4000:]
  return process


def _without_log_level():
  """The environment without TF_CPP_MIN_LOG_LEVEL (the tests' conftest sets it): what the
  tool prints of TensorFlow's logs is its own choice."""
  return {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}


def _run(tmp_path, task_section=None):
  """A tiny model_dir (checkpoint and params.yaml) of the pretraining task, or of the
  task of `task_section` (export_helpers.TASK_SECTIONS), and an export_dir beside it."""
  vocab = helpers.write_vocab(tmp_path)
  config = helpers.experiment(vocab, task_section)
  model_dir = tmp_path / "model_dir"
  helpers.save_checkpoint(helpers.build_model(config), model_dir)
  config.save(str(model_dir / "params.yaml"))
  return model_dir, tmp_path / "exports"


@pytest.mark.slow
def test_export_tool_writes_next_version_and_request_tool_body_is_accepted(tmp_path):
  model_dir, export_dir = _run(tmp_path)
  os.makedirs(export_dir / "4")
  out = _tool("export_saved_model.py", f"--checkpoint={model_dir}",
              f"--export_dir={export_dir}", "--top_k=2", env=_without_log_level())
  # The tool's own lines alone: no absl or TensorFlow INFO line, no start-up line.
  assert out.stderr == "", out.stderr
  # The directory's newest checkpoint, named where it is restored and in the summary.
  checkpoint = str(model_dir / "ckpt-1")
  assert f"restored {checkpoint}\n" in out.stdout
  assert f"Exported FillMaskServing of {checkpoint} to {export_dir / '5'}" in out.stdout
  assert "all allowlisted: True" in out.stdout
  body_path = tmp_path / "request.json"
  _tool("make_serving_request.py", "--signature=serve_examples", "--format=inputs",
        "--text=the [MASK] sat", "--text=", f"--output={body_path}")
  with open(body_path, encoding="utf-8") as f:
    body = json.load(f)
  result = helpers.run_fresh_process([(str(export_dir / "5"), [], [body])], tmp_path / "plan")
  assert result[0]["rest"] == [{"signature": "serve_examples", "format": "inputs", "ok": True,
                                "batch": {"mask_count": 2, "masks_dropped": 2,
                                          "mask_positions": 2,
                                          "top_k_ids": 2, "top_k_tokens": 2,
                                          "top_k_probabilities": 2,
                                          "top_k_logits": 2}}]


@pytest.mark.slow
def test_export_tool_writes_a_bfloat16_export_with_allowlisted_ops(tmp_path):
  model_dir, export_dir = _run(tmp_path, helpers.TASK_SECTIONS["mnli"])
  out = _tool("export_saved_model.py", f"--checkpoint={model_dir}",
              f"--export_dir={export_dir}", "--quantize=bfloat16", "-v", "0",
              env=_without_log_level())
  # --verbosity shows the libraries' INFO lines, TensorFlow's start-up ones included.
  assert "] Restored encoder " in out.stderr, out.stderr
  assert "oneDNN custom operations" in out.stderr or "cpu_feature_guard" in out.stderr, (
      out.stderr)
  assert (f"Exported ClassifierServing of {model_dir / 'ckpt-1'} to {export_dir / '1'}"
          in out.stdout)
  assert "all allowlisted: True" in out.stdout
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  reader = tf.train.load_checkpoint(str(export_dir / "1" / "variables" / "variables"))
  dtypes = [dtype.name for name, dtype in reader.get_variable_to_dtype_map().items()
            if name.endswith("VARIABLE_VALUE")]
  # LayerNorm's gamma and beta (1 + 2 per block) stay float32; every other weight is bf16.
  assert dtypes.count("float32") == 2 * (1 + 2 * 2)
  assert dtypes.count("bfloat16") > dtypes.count("float32")


@pytest.mark.slow
def test_export_tool_writes_an_int8_onednn_export_and_refuses_without_onednn(tmp_path):
  model_dir, export_dir = _run(tmp_path, helpers.TASK_SECTIONS["mnli"])
  out = _tool("export_saved_model.py", f"--checkpoint={model_dir}",
              f"--export_dir={export_dir}", "--quantize=int8_onednn")
  assert "all allowlisted: True" in out.stdout
  # With oneDNN's kernels off, TensorFlow has no kernel that computes the product: one
  # line, and no version written.
  env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0"}
  refused = _tool("export_saved_model.py", f"--checkpoint={model_dir}",
                  f"--export_dir={export_dir}", "--quantize=int8_onednn", env=env,
                  returncode=1)
  [line] = [line for line in refused.stderr.splitlines() if "error:" in line]
  assert line.startswith("export_saved_model: error: int8_onednn: this TensorFlow")
  assert "Traceback" not in refused.stderr
  assert sorted(os.listdir(export_dir)) == ["1"]
