"""The devices bench/gpu_pretraining_worker.py runs on, and the step each of its sides
hands it: standard library only (jax and torch are passed in by their callers), so that
nothing here needs TensorFlow or either framework at import.
"""

import os
from typing import Callable, Dict, NamedTuple, Optional

from bench import matmul_peak


class Side(NamedTuple):
  """One side's training step, ready to time.

  step: runs one training step, returns its loss (a device scalar; not synchronized).
  sync: waits for the device's pending work.
  info: framework, device and params (the trained weights, not float8 scaling state).
  peak_memory_mb: the device's peak memory so far, or None where unknown.
  capture: (step, sync, steps, directory) -> (trace path, wall seconds per step): runs
    steps back to back under the framework's profiler (bench/kernel_profile.py).
  """

  step: Callable
  sync: Callable
  info: Dict
  peak_memory_mb: Callable[[], Optional[float]]
  capture: Callable


def select_device(device: str) -> None:
  """Points jax and torch at the --device asked for, before either is imported."""
  if device == "cpu":
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
  elif device == "gpu":
    os.environ["JAX_PLATFORMS"] = "cuda"  # jax raises when it finds no CUDA device.


def jax_device_name(jax) -> str:
  device = jax.devices()[0]
  if device.platform == "cpu":
    return cpu_name()
  return f"{device.device_kind} ({device.platform})"


def torch_device(torch, wanted: str):
  """("cuda" or "cpu", a function that waits for the device); `wanted` is --device."""
  if torch.cuda.is_available():
    return "cuda", torch.cuda.synchronize
  if wanted == "gpu":
    raise RuntimeError("--device=gpu: torch sees no CUDA device")
  return "cpu", lambda: None


def torch_device_name(torch) -> str:
  if torch.cuda.is_available():
    return f"{torch.cuda.get_device_name()} (cuda)"
  return cpu_name()


def cpu_name() -> str:
  """'AMD EPYC (cpu, 2 cores, AVX-512, AVX512_BF16, ...)': the model and the instruction
  sets its products can use (bench/matmul_peak.py)."""
  return f"{matmul_peak.cpu_model()} (cpu, {os.cpu_count()} cores, {matmul_peak.cpu_isa()})"
