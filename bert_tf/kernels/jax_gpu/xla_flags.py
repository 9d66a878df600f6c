"""The XLA settings the JAX engine runs with by default, set in XLA_FLAGS before JAX
starts its backends (XLA reads the variable once, when the first backend starts).

Command buffers off on GPUs (`--xla_gpu_enable_command_buffer=`, an empty list of
command types). With them, XLA records the step's kernels into CUDA graphs and, before
each run, updates every recorded kernel whose buffers moved, then launches the graphs:
the BERT-large step (about 1,200 donated state arrays, ~2,500 fusions) spent ~13 ms
updating and ~9 ms in cuGraphLaunch before its first kernel ran, on every step
synchronized with the host. Without them XLA launches each kernel from the host: a few
microseconds apiece, issued while the GPU works through the ones before (the step's
kernels average over 20 us of GPU time), so the GPU starts at once and rarely waits.

A user's own XLA_FLAGS entry for a flag is kept: `--xla_gpu_enable_command_buffer=+FUSION`
(XLA's default list plus fusions, which it holds already) restores XLA's default.
Imports nothing: it runs before Keras and JAX load.
"""

import os
import re
from typing import Mapping, MutableMapping, Optional

# Flag name -> value, added to XLA_FLAGS unless it names the flag already.
JAX_DEFAULTS = {"xla_gpu_enable_command_buffer": ""}


def sets_flag(xla_flags: str, name: str) -> bool:
  """Whether an XLA_FLAGS string has an entry for flag `name` (`--name=...` or `--name`)."""
  return re.search(r"(^|\s)--?" + re.escape(name) + r"(=|\s|$)", xla_flags) is not None


def with_defaults(xla_flags: str, defaults: Mapping[str, str] = JAX_DEFAULTS) -> str:
  """`xla_flags` followed by `--name=value` for each default it does not set."""
  entries = [xla_flags.strip()] if xla_flags.strip() else []
  entries += [f"--{name}={value}" for name, value in defaults.items()
              if not sets_flag(xla_flags, name)]
  return " ".join(entries)


def apply_jax_defaults(environ: Optional[MutableMapping[str, str]] = None) -> str:
  """Adds JAX_DEFAULTS to XLA_FLAGS in `environ` (default os.environ), keeping every
  entry already there; returns the new value. Call it before JAX starts a backend."""
  environ = os.environ if environ is None else environ
  environ["XLA_FLAGS"] = with_defaults(environ.get("XLA_FLAGS", ""))
  return environ["XLA_FLAGS"]
