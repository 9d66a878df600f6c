"""The accelerators a JAX step is compiled for ahead of time, without them: TPU slices
(libtpu's compile-only topologies) and GPU nodes (the CUDA plugin with a target config
built from the GPU's published figures, accelerators.yaml beside this module).

A target is named `PLATFORM:SPEC`:

  tpu:v5e-16       a v5e slice of 16 chips (Cloud's v5litepod-16); v4-N and v5p-N count
                   TensorCores (two per chip), as Cloud names them: v5p-64 is 32 chips
  tpu:2xv5e-256    two slices of a v5e-256 (multislice, num_slices)
  gpu:8xH100       one host with 8 H100s; gpu:H100 is one GPU
  gpu:2x8xH100     two hosts with 8 H100s each

Imports JAX when a target's devices are made (`Target.devices`), not at load.
"""

import dataclasses
import functools
import math
import os
import re
from typing import Dict, List, Optional

from bert_tf import configs
from bert_tf.utils import errors
from bert_tf.utils import optional

_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "accelerators.yaml")
_TPU = re.compile(r"^tpu:(?:(\d+)x)?(v\w+?)-(\d+)$")
_GPU = re.compile(r"^gpu:(?:(\d+)x)?(?:(\d+)x)?(\w+)$")
TPU_INSTALL = "pip install 'jax[tpu]'"
GPU_INSTALL = "pip install 'jax[cuda13]'"
GPU_DEVICES_PER_HOST = 8


class TargetError(errors.UserError, ValueError):
  """A target name that names no known accelerator, or one this install cannot compile
  for."""


@functools.lru_cache(maxsize=None)
def accelerators() -> Dict[str, Dict[str, dict]]:
  """accelerators.yaml: {"tpu": {generation: figures}, "gpu": {model: figures}}."""
  return configs.load_yaml(_DATA)


def known_targets() -> str:
  """The target forms, for an error's one line."""
  tpus = ", ".join(accelerators()["tpu"])
  gpus = ", ".join(accelerators()["gpu"])
  return (f"tpu:GEN-N or tpu:SxGEN-N (GEN one of {tpus}), gpu:NxMODEL or gpu:HxNxMODEL "
          f"(MODEL one of {gpus})")


@dataclasses.dataclass(frozen=True)
class Target:
  """One accelerator target.

  Attributes:
    name: as given ("tpu:v5e-16").
    platform: "tpu" or "gpu" (the platform the model is built for).
    chip: the generation or model ("v5e", "H100").
    chips: JAX devices in all (a TPU chip in megacore mode is one device).
    slices: TPU slices (1 for GPUs); hosts: GPU hosts (TPU: libtpu's own).
    topology: the topology name the compile-only devices are made from.
    figures: the chip's entry of accelerators.yaml.
  """

  name: str
  platform: str
  chip: str
  chips: int
  slices: int
  hosts: int
  topology: str
  figures: dict

  @property
  def memory_bytes(self) -> int:
    """Memory per chip, in bytes."""
    if self.platform == "tpu":
      return int(self.figures["memory_gib"] * 2**30)
    return int(self.figures["device_memory_size"])

  @property
  def peak_flops(self) -> float:
    """Dense bfloat16 matmul peak per chip, FLOP/s (published)."""
    return float(self.figures["peak_tflops"]) * 1e12

  @property
  def memory_bandwidth(self) -> float:
    """Bytes/s per chip (published)."""
    return float(self.figures["memory_bandwidth_gbs"]) * 1e9

  @property
  def interconnect_bandwidth(self) -> Optional[float]:
    """Bytes/s per chip each way over the chip-to-chip links of one slice or host (ICI,
    NVLink; published bidirectional, halved), or None where the target's devices are
    also joined by the data-centre network (several slices or hosts) or the maker gives
    no per-chip figure."""
    bidirectional = self.figures.get("interconnect_gbs")
    if not bidirectional or self.slices > 1 or self.hosts > 1:
      return None
    return float(bidirectional) * 1e9 / 2

  @property
  def compiler_options(self) -> Dict[str, object]:
    """XLA options the step is compiled with for this target: on GPUs, GEMMs through
    cuBLAS, not XLA's Triton GEMM fusions, whose tiling fails without a GPU to tune on
    ("Couldn't find output tile sizes", JAX 0.10.2) for the last block's few rows."""
    return {"xla_gpu_enable_triton_gemm": False} if self.platform == "gpu" else {}

  def devices(self) -> List:
    """The target's compile-only JAX devices, in mesh order.

    Raises:
      TargetError: the compiler for the platform is not installed (libtpu, the CUDA
        plugin), naming how to install it.
    """
    from jax.experimental import topologies  # pylint: disable=g-import-not-at-top
    if self.platform == "tpu":
      if not optional.installed("libtpu"):
        raise TargetError(f"{self.name}: libtpu is not installed: {TPU_INSTALL}")
      # libtpu locks a file so that one process owns a host's TPUs; compiling owns none,
      # and two compiles may run at once.
      os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
      options = {}
      if self.figures.get("chip_config_name"):
        options["chip_config_name"] = self.figures["chip_config_name"]
      if self.slices > 1:
        options["num_slices"] = self.slices
      try:
        return list(topologies.get_topology_desc(
            platform="tpu", topology_name=self.topology, **options).devices)
      except RuntimeError as e:  # libtpu found but not loadable by this jax, or refused
        hint = f": {TPU_INSTALL}" if "not installed" in str(e) else ""
        raise TargetError(f"{self.name}: {_first_line(e)}{hint}") from None
    try:
      topology = topologies.get_topology_desc(
          platform="cuda", target_config=gpu_target_config(self.figures),
          topology=self.topology)
    except Exception as e:  # pylint: disable=broad-except
      raise TargetError(f"{self.name}: JAX's CUDA plugin cannot make the devices "
                        f"({_first_line(e)}): {GPU_INSTALL}") from None
    return list(topology.devices)


def _first_line(error: BaseException) -> str:
  text = str(error).strip()
  return text.splitlines()[0] if text else type(error).__name__


def tpu_topology(dims: int, chips: int) -> str:
  """The smallest-first chip grid of a slice of `chips` chips (a power of two, at least
  4): 2x2, 2x4, 4x4, 4x8, ... for 2D slices; 2x2x1, 2x2x2, 2x2x4, 2x4x4, 4x4x4, ... for
  3D ones. Raises TargetError for other counts."""
  if chips < 4 or chips & (chips - 1):
    raise TargetError(f"a TPU slice of {chips} chips: slices here have a power of two "
                      "of at least 4 chips")
  shape = [2, 2] + [1] * (dims - 2)
  while math.prod(shape) < chips:  # doubles the smallest side, the last of equals
    smallest = min(shape)
    shape[max(i for i, side in enumerate(shape) if side == smallest)] *= 2
  return "x".join(map(str, shape))


def resolve(name: str) -> Target:
  """The Target named `name` (see the module docstring).

  Raises:
    TargetError: a name of no known form or accelerator, in one line naming the forms.
  """
  data = accelerators()
  tpu, gpu = _TPU.match(name or ""), _GPU.match(name or "")
  if tpu and tpu.group(2) in data["tpu"]:
    slices, generation, count = int(tpu.group(1) or 1), tpu.group(2), int(tpu.group(3))
    figures = data["tpu"][generation]
    if count % figures["cores_per_chip"]:
      raise TargetError(f"{name}: {generation}-N counts TensorCores, "
                        f"{figures['cores_per_chip']} per chip")
    chips = count // figures["cores_per_chip"]
    try:
      grid = tpu_topology(figures["topology_dims"], chips)
    except TargetError as e:
      raise TargetError(f"{name}: {e}") from None
    return Target(name, "tpu", generation, chips * slices, slices, 0,
                  f"{generation}:{grid}", figures)
  if gpu and gpu.group(3) in data["gpu"]:
    first, second = gpu.group(1), gpu.group(2)
    hosts, per_host = (int(first), int(second)) if second else (1, int(first or 1))
    if per_host > GPU_DEVICES_PER_HOST or hosts < 1 or per_host < 1:
      raise TargetError(f"{name}: a host here has 1 to {GPU_DEVICES_PER_HOST} GPUs")
    return Target(name, "gpu", gpu.group(3), hosts * per_host, 1, hosts,
                  f"1x{hosts}x{per_host}", data["gpu"][gpu.group(3)])
  raise TargetError(f"unknown target '{name}': the forms are {known_targets()}")


def gpu_target_config(figures: dict) -> str:
  """XLA's GpuTargetConfig (protobuf text) for a GPU of accelerators.yaml: what its GPU
  compiler reads of a device it does not have."""
  major, minor = figures["compute_capability"]
  return f"""
gpu_device_info {{
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_core: {figures['shared_memory_per_core']}
  threads_per_core_limit: 2048
  core_count: {figures['core_count']}
  fpus_per_core: {figures['fpus_per_core']}
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: {int(figures['memory_bandwidth_gbs'] * 1e9)}
  l2_cache_size: {figures['l2_cache_size']}
  clock_rate_ghz: {figures['clock_rate_ghz']}
  device_memory_size: {figures['device_memory_size']}
  shared_memory_per_block_optin: {figures['shared_memory_per_block_optin']}
  cuda_compute_capability {{ major: {major} minor: {minor} }}
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
}}
platform_name: "CUDA"
dnn_version_info {{ major: 9 minor: 7 }}
runtime_version {{ major: 13 minor: 0 patch: 0 }}
device_description_str: "{figures['description']}"
"""
