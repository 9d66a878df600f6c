"""What TensorFlow runs on a CPU: its oneDNN kernels, where it leaves them off, and no
GPU device lookup on a machine without NVIDIA's driver.

TensorFlow turns its oneDNN CPU kernels on by itself only on x86-64 CPUs with AVX-512
VNNI/BF16 or AMX; on other x86-64 CPUs (AVX2, for example AMD Zen 3) BERT trains
faster with them. TensorFlow reads `TF_ENABLE_ONEDNN_OPTS` once, when it is first
imported, so the choice is made before that: the tools (tools/*.py) call
`prefer_onednn` first thing. Importing bert_tf changes nothing in the environment.
Setting the variable yourself (`TF_ENABLE_ONEDNN_OPTS=0` keeps the kernels off) wins.
The tools call `leave_out_absent_gpus` and `quiet_startup_logs` beside it, for the same
reason.

This module imports nothing heavy, so that it can run before TensorFlow loads.
"""

import ctypes
import os
import platform
import sys
from typing import MutableMapping, Optional
import warnings

ONEDNN_VARIABLE = "TF_ENABLE_ONEDNN_OPTS"
DEVICE_TYPES_VARIABLE = "TF_ENABLED_DEVICE_TYPES"
# The device kinds TensorFlow's Linux wheel registers, less GPU.
DEVICE_TYPES_WITHOUT_GPU = "CPU,TPU,TPU_SYSTEM"
LOG_LEVEL_VARIABLE = "TF_CPP_MIN_LOG_LEVEL"
# TensorFlow's C++ logging at errors only: its start-up information (oneDNN, CUDA
# stubs, device factories, CPU instructions) and warnings are left out.
QUIET_LOG_LEVEL = "2"
# None at all: for output that is the tool's answer (a TensorFlow failure is a Python
# exception all the same).
SILENT_LOG_LEVEL = "3"
# What quiet_startup_logs set in os.environ (show_startup_logs undoes it).
_QUIETED = {}


def prefer_onednn(env: Optional[MutableMapping[str, str]] = None) -> bool:
  """Sets TF_ENABLE_ONEDNN_OPTS=1 in `env` (default os.environ) on x86-64, unless the
  variable is already set either way.

  Returns:
    Whether it set the variable. It warns when it sets it in os.environ after
    TensorFlow was imported: this process keeps TensorFlow's choice, only processes it
    starts get the new one.
  """
  env = os.environ if env is None else env
  if platform.machine().lower() not in ("x86_64", "amd64") or ONEDNN_VARIABLE in env:
    return False
  env[ONEDNN_VARIABLE] = "1"
  # A process that blocks TensorFlow (sys.modules["tensorflow"] = None, as TF-free runs
  # do) has not imported it.
  if env is os.environ and sys.modules.get("tensorflow") is not None:
    warnings.warn(f"{ONEDNN_VARIABLE}=1 was set after TensorFlow was imported; it applies "
                  "to child processes only. Call bert_tf.cpu_kernels.prefer_onednn "
                  "before importing TensorFlow.", RuntimeWarning, stacklevel=2)
  return True


def nvidia_driver_loads() -> bool:
  """Whether libcuda.so.1, NVIDIA's driver library, loads (as TensorFlow looks for it)."""
  try:
    ctypes.CDLL("libcuda.so.1")
  except OSError:
    return False
  return True


def _device_plugins_installed() -> bool:
  """Whether a pluggable-device package (tensorflow-plugins/) may add device kinds."""
  return any(os.path.isdir(os.path.join(entry, "tensorflow-plugins"))
             for entry in sys.path if entry)


def leave_out_absent_gpus(env: Optional[MutableMapping[str, str]] = None,
                          driver_loads=nvidia_driver_loads) -> bool:
  """On Linux without NVIDIA's driver, sets TF_ENABLED_DEVICE_TYPES=CPU,TPU,TPU_SYSTEM in
  `env` (default os.environ), so that TensorFlow registers no GPU device factory.

  TensorFlow's Linux wheel is built for CUDA: where libcuda.so.1 does not load it still
  calls cuInit when it first lists its devices, and logs the failure as an error
  (`failed call to cuInit: ... UNKNOWN ERROR (303)`) on every machine without a GPU. The
  variable, read once when TensorFlow loads, leaves out the GPU device kind alone, which
  could find nothing there. Machines with the driver, with pluggable-device plugins, and
  a variable set already are left as they are; other messages keep their log level.

  Returns:
    Whether it set the variable.
  """
  env = os.environ if env is None else env
  if (not sys.platform.startswith("linux") or DEVICE_TYPES_VARIABLE in env
      or driver_loads() or _device_plugins_installed()):
    return False
  env[DEVICE_TYPES_VARIABLE] = DEVICE_TYPES_WITHOUT_GPU
  return True


def quiet_startup_logs(env: Optional[MutableMapping[str, str]] = None,
                       level: str = QUIET_LOG_LEVEL) -> bool:
  """Sets TF_CPP_MIN_LOG_LEVEL=`level` (default 2: errors only; 3: none) in `env`
  (default os.environ) unless it is set, so that a tool's output starts with its own
  lines, not TensorFlow's start-up information (`TF_CPP_MIN_LOG_LEVEL=0` shows it
  again). Read once, when TensorFlow loads; see also `import_tensorflow_quietly`.

  Returns:
    Whether it set the variable.
  """
  env = os.environ if env is None else env
  if LOG_LEVEL_VARIABLE in env:
    return False
  env[LOG_LEVEL_VARIABLE] = level
  if env is os.environ:
    _QUIETED[LOG_LEVEL_VARIABLE] = level
  return True


def show_startup_logs(verbosity: int) -> bool:
  """Undoes quiet_startup_logs for a tool run with absl's --verbosity: sets
  TF_CPP_MIN_LOG_LEVEL to the same level (verbosity 0 or more: info, 0; -1: warnings,
  1; -2: errors, 2; less: 3) where quiet_startup_logs set it. TensorFlow reads it when
  it loads: it applies only where TensorFlow has not loaded yet.

  Returns:
    Whether it set the variable (a variable the user set stays as it is).
  """
  if LOG_LEVEL_VARIABLE not in _QUIETED or (
      os.environ.get(LOG_LEVEL_VARIABLE) != _QUIETED[LOG_LEVEL_VARIABLE]):
    return False
  os.environ[LOG_LEVEL_VARIABLE] = str(min(max(-verbosity, 0), 3))
  return True


def import_tensorflow_quietly() -> None:
  """Imports TensorFlow, leaving out what it writes to stderr while it loads where
  TF_CPP_MIN_LOG_LEVEL asks for quiet (2 or more).

  The lines TensorFlow's libraries log while they load (CUDA stubs, oneDNN) come before
  its logging is set up, and absl writes them whatever the level. A failed import is
  still a Python exception, raised with its message.
  """
  level = os.environ.get(LOG_LEVEL_VARIABLE, "0")
  if sys.modules.get("tensorflow") is not None or not level.isdigit() or int(level) < 2:
    import tensorflow  # pylint: disable=g-import-not-at-top,unused-import
    return
  sys.stderr.flush()
  saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
  try:
    os.dup2(devnull, 2)
    import tensorflow  # pylint: disable=g-import-not-at-top,unused-import,redefined-outer-name
  finally:
    os.dup2(saved, 2)
    os.close(saved)
    os.close(devnull)
