"""The choice of TensorFlow CPU kernels (bert_tf.cpu_kernels): importing bert_tf leaves
the environment alone, the tools choose oneDNN before TensorFlow loads. The startup cases
run in fresh interpreters, since TensorFlow reads TF_ENABLE_ONEDNN_OPTS once, when it is
first imported."""

import json
import os
import platform
import subprocess
import sys
import types
import warnings

import pytest

from bert_tf import cpu_kernels
import paths

_X86 = platform.machine().lower() in ("x86_64", "amd64")
_ROOT = paths.ROOT

# Runs `startup` (Python source), then imports TensorFlow, and reports what changed in
# os.environ and the variable's value at the moment TensorFlow was first imported.
_PROBE = """
import json, os, sys
seen = {{}}

class Probe:
  def find_spec(self, name, path=None, target=None):
    if name == "tensorflow" and "at_tensorflow_import" not in seen:
      seen["at_tensorflow_import"] = os.environ.get({variable!r})
    return None

sys.meta_path.insert(0, Probe())
before = dict(os.environ)
{startup}
import tensorflow
changed = {{k: os.environ.get(k) for k in set(before) | set(os.environ)
           if before.get(k) != os.environ.get(k)}}
print(json.dumps({{"changed": changed, **seen}}))
"""

_TOOL_STARTUP = """
import importlib.util
spec = importlib.util.spec_from_file_location("tool", {path!r})
spec.loader.exec_module(importlib.util.module_from_spec(spec))
"""


def _run(startup, variable=None):
  env = {k: v for k, v in os.environ.items()
         if k not in (cpu_kernels.ONEDNN_VARIABLE, cpu_kernels.DEVICE_TYPES_VARIABLE)}
  if variable is not None:
    env[cpu_kernels.ONEDNN_VARIABLE] = variable
  env["TF_CPP_MIN_LOG_LEVEL"] = "3"
  env["PYTHONPATH"] = os.pathsep.join([_ROOT, env.get("PYTHONPATH", "")])
  source = _PROBE.format(variable=cpu_kernels.ONEDNN_VARIABLE, startup=startup)
  out = subprocess.run([sys.executable, "-c", source], env=env, cwd=_ROOT,
                       capture_output=True, text=True, check=True, timeout=300)
  return json.loads(out.stdout.strip().splitlines()[-1])


def _train_tool_startup():
  return _TOOL_STARTUP.format(path=os.path.join(_ROOT, "tools", "train.py"))


def _device_types_chosen_here():
  """What a tool's startup sets for TensorFlow's device kinds on this machine."""
  chosen = {}
  cpu_kernels.leave_out_absent_gpus(chosen)
  return chosen


@pytest.mark.slow  # an import in a process
def test_importing_bert_tf_leaves_the_environment_unchanged():
  report = _run("import bert_tf, bert_tf.models, bert_tf.training.trainer")
  assert report == {"changed": {}, "at_tensorflow_import": None}


@pytest.mark.skipif(not _X86, reason="oneDNN is preferred on x86-64 only")
def test_a_tools_startup_turns_onednn_on_before_tensorflow_loads():
  report = _run(_train_tool_startup())
  assert report == {"changed": {cpu_kernels.ONEDNN_VARIABLE: "1",
                                **_device_types_chosen_here()},
                    "at_tensorflow_import": "1"}


@pytest.mark.slow  # a tool's start-up in a process
def test_a_tools_startup_keeps_an_explicit_choice():
  report = _run(_train_tool_startup(), variable="0")
  assert report == {"changed": _device_types_chosen_here(), "at_tensorflow_import": "0"}


def test_prefer_onednn_sets_the_variable_only_when_unset_on_x86():
  env = {}
  assert cpu_kernels.prefer_onednn(env) == _X86
  assert env == ({cpu_kernels.ONEDNN_VARIABLE: "1"} if _X86 else {})
  chosen = {cpu_kernels.ONEDNN_VARIABLE: "0"}
  assert not cpu_kernels.prefer_onednn(chosen)
  assert chosen == {cpu_kernels.ONEDNN_VARIABLE: "0"}


@pytest.mark.skipif(not _X86, reason="the variable is set on x86-64 only")
def test_prefer_onednn_warns_only_where_tensorflow_was_imported(monkeypatch):
  monkeypatch.delenv(cpu_kernels.ONEDNN_VARIABLE, raising=False)
  # A process that blocks TensorFlow (a TF-free run) never imported it: no warning.
  monkeypatch.setitem(sys.modules, "tensorflow", None)
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    assert cpu_kernels.prefer_onednn()
  monkeypatch.delenv(cpu_kernels.ONEDNN_VARIABLE)
  monkeypatch.setitem(sys.modules, "tensorflow", types.ModuleType("tensorflow"))
  with pytest.warns(RuntimeWarning, match="after TensorFlow was imported"):
    assert cpu_kernels.prefer_onednn()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="TensorFlow's CUDA wheel")
def test_gpu_devices_are_left_out_only_where_nvidia_driver_is_absent_and_nothing_chosen():
  env = {}
  assert cpu_kernels.leave_out_absent_gpus(env, driver_loads=lambda: False)
  assert env == {cpu_kernels.DEVICE_TYPES_VARIABLE: "CPU,TPU,TPU_SYSTEM"}
  with_driver = {}
  assert not cpu_kernels.leave_out_absent_gpus(with_driver, driver_loads=lambda: True)
  assert with_driver == {}
  chosen = {cpu_kernels.DEVICE_TYPES_VARIABLE: "CPU,GPU"}
  assert not cpu_kernels.leave_out_absent_gpus(chosen, driver_loads=lambda: False)
  assert chosen == {cpu_kernels.DEVICE_TYPES_VARIABLE: "CPU,GPU"}
