"""A TensorFlow tool on a machine without NVIDIA's driver prints no CUDA error: its
startup leaves TensorFlow's GPU device kind out (bert_tf.cpu_kernels.leave_out_absent_gpus),
where TensorFlow by itself logs `failed call to cuInit` when it lists its devices. Unless
TF_CPP_MIN_LOG_LEVEL asks for it, TensorFlow's start-up logging is left out altogether: a
refused run prints its one error line alone."""

import os
import subprocess
import sys

import pytest

import paths
from bert_tf import cpu_kernels

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or cpu_kernels.nvidia_driver_loads(),
    reason="a Linux machine without NVIDIA's driver")

CUINIT = "failed call to cuInit"


def _stderr(argv):
  env = {k: v for k, v in os.environ.items() if k != cpu_kernels.DEVICE_TYPES_VARIABLE}
  env["TF_CPP_MIN_LOG_LEVEL"] = "1"  # warnings and errors shown
  process = subprocess.run([sys.executable, *argv], env=env, cwd=paths.ROOT,
                           capture_output=True, text=True, timeout=600, check=False)
  assert process.returncode == 0, process.stderr[-3000:]
  return process.stderr


def test_tensorflow_tools_print_no_cuinit_error_without_a_gpu(tmp_path):
  # TensorFlow alone, on this machine: the error the tools avoid.
  assert CUINIT in _stderr(["-c", "import tensorflow as tf; tf.config.list_physical_devices()"])
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("the cat sat on the mat .\nthe dog ran in the park .\n" * 50)
  stderr = _stderr([os.path.join(paths.ROOT, "tools", "build_vocab.py"), f"--input={corpus}",
                    f"--output={tmp_path / 'vocab.txt'}", "--vocab_size=40"])
  assert (tmp_path / "vocab.txt").is_file()
  assert CUINIT not in stderr, stderr
  assert "E0000" not in stderr, stderr


def test_tensorflow_tools_print_their_error_line_alone_without_tensorflow_s_start_up_logs(
    tmp_path):
  env = {k: v for k, v in os.environ.items()
         if k not in (cpu_kernels.DEVICE_TYPES_VARIABLE, cpu_kernels.LOG_LEVEL_VARIABLE)}
  runs = {
      "export_saved_model": [f"--checkpoint={tmp_path / 'missing'}",
                             f"--export_dir={tmp_path / 'export'}"],
      "build_vocab": [f"--input={tmp_path / 'nothing-*.txt'}", f"--output={tmp_path / 'v.txt'}"],
  }
  for tool, args in runs.items():
    process = subprocess.run([sys.executable, os.path.join(paths.ROOT, "tools", f"{tool}.py"),
                              *args], env=env, cwd=paths.ROOT, capture_output=True, text=True,
                             timeout=600, check=False)
    lines = [line for line in process.stderr.splitlines() if line.strip()]
    assert process.returncode == 1 and len(lines) == 1, process.stderr[-3000:]
    assert lines[0].startswith(f"{tool}: error: ") and process.stdout == "", lines
