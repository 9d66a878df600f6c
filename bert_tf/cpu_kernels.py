"""What TensorFlow runs on a CPU: its oneDNN kernels, where it leaves them off, and no
GPU device lookup on a machine without NVIDIA's driver.

TensorFlow turns its oneDNN CPU kernels on by itself only on x86-64 CPUs with AVX-512
VNNI/BF16 or AMX; on other x86-64 CPUs (AVX2, for example AMD Zen 3) BERT trains
faster with them. TensorFlow reads `TF_ENABLE_ONEDNN_OPTS` once, when it is first
imported, so the choice is made before that: the tools (tools/*.py) call
`prefer_onednn` first thing. Importing bert_tf changes nothing in the environment.
Setting the variable yourself (`TF_ENABLE_ONEDNN_OPTS=0` keeps the kernels off) wins.
The tools call `leave_out_absent_gpus` beside it, for the same reason.

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
