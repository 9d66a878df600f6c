"""What a training step compiled ahead of time for a target says about a run there
(bert_tf.training.jax_engine.compile_for): memory per device against the device's, the
step's FLOPs against the analytic count (bert_tf.utils.model_flops), its collectives and
their sizes, how attention, LayerNorm and dropout were lowered (custom calls in the
optimized HLO), and a step time: the compiler's estimate where it gives a usable one
(TPU), else a roofline from FLOPs and bytes. All of them are estimates: only a device
measures.
"""

import collections
import dataclasses
import functools
import re
from typing import Dict, List, Optional

from bert_tf import configs
from bert_tf.utils import model_flops

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
               "collective-permute")
_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(?P<shape>.*?)\s+(?P<op>" + "|".join(COLLECTIVES)
    + r")(?:-start)?\((?P<rest>.*)$")
_ARRAY = re.compile(r"\b(pred|[suf]\d+|bf16|f8\w*)\[([\d,]*)\]")
_CUSTOM_CALL = re.compile(r'custom_call_target="([^"]+)"')
_OP_NAME = re.compile(r'op_name="([^"]+)"')
_BYTES = {"pred": 1, "bf16": 2}
_WRAPPED = re.compile(r"^(?:jit|jvp|transpose|vmap|checkpoint|remat)\((.*)\)$")


def shape_bytes(shape: str) -> int:
  """Bytes of the arrays an HLO shape names ("(f32[768]{0}, bf16[2,3]{1,0})": 3084)."""
  total = 0
  for dtype, dims in _ARRAY.findall(shape):
    size = _BYTES.get(dtype) or (1 if dtype.startswith("f8") else max(1, int(dtype[1:]) // 8))
    for dim in filter(None, dims.split(",")):
      size *= int(dim)
    total += size
  return total


@dataclasses.dataclass
class Collective:
  """One kind of collective in a compiled program: how many, their result bytes, and
  the model ops they come from (jax's op_name metadata, first few)."""

  count: int = 0
  bytes: int = 0
  sources: collections.Counter = dataclasses.field(default_factory=collections.Counter)


def collectives(hlo: str) -> Dict[str, Collective]:
  """{op: Collective} over an optimized HLO module's text (async pairs counted once)."""
  found: Dict[str, Collective] = {}
  for line in hlo.splitlines():
    match = _INSTRUCTION.match(line)
    if not match:
      continue
    entry = found.setdefault(match.group("op"), Collective())
    entry.count += 1
    entry.bytes += shape_bytes(match.group("shape"))
    name = _OP_NAME.search(line)
    entry.sources[_short_op_name(name.group(1)) if name else "(no metadata)"] += 1
  return found


def _short_op_name(name: str) -> str:
  """jit(step)/.../transformer/layer_3/attention/... -> the op's last layer path,
  layer numbers dropped (one entry per kind of source)."""
  parts = []
  for part in name.split("/"):
    while _WRAPPED.match(part):
      part = _WRAPPED.match(part).group(1)
    if part != "step":
      parts.append(part)
  return re.sub(r"_\d+\b", "_N", "/".join(parts[-3:]))


def custom_calls(hlo: str) -> collections.Counter:
  """{custom_call_target: count} of an optimized HLO module's text."""
  return collections.Counter(_CUSTOM_CALL.findall(hlo))


@dataclasses.dataclass
class Compiled:
  """The figures of one compiled step, per device (an SPMD program: each device runs the
  same one). optimal_seconds is None where the compiler gives none."""

  global_batch_size: int
  argument_bytes: int
  output_bytes: int
  temp_bytes: int
  alias_bytes: int
  code_bytes: int
  flops: float
  bytes_accessed: float
  optimal_seconds: Optional[float]
  hlo: str
  compile_seconds: float

  @property
  def peak_bytes(self) -> int:
    """Device memory the step needs at once: arguments, outputs not aliased to a
    donated argument, temporaries and code."""
    return (self.argument_bytes + self.output_bytes - self.alias_bytes + self.temp_bytes
            + self.code_bytes)

  @classmethod
  def read(cls, compiled, global_batch_size: int, compile_seconds: float) -> "Compiled":
    """From a jax.stages.Compiled."""
    memory = compiled.memory_analysis()
    cost = compiled.cost_analysis() or {}
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    optimal = cost.get("optimal_seconds")
    return cls(global_batch_size, memory.argument_size_in_bytes, memory.output_size_in_bytes,
               memory.temp_size_in_bytes, memory.alias_size_in_bytes,
               memory.generated_code_size_in_bytes, float(cost.get("flops", 0.0)),
               float(cost.get("bytes accessed", 0.0)),
               float(optimal) if optimal is not None else None, compiled.as_text(),
               compile_seconds)


@dataclasses.dataclass
class BatchSearch:
  """The largest global batch found to fit (0: none), the smallest found not to (None:
  none tried), and the compiles it took."""

  largest: int
  smallest_failing: Optional[int]
  compiles: int


def analytic_flops(experiment: configs.ExperimentConfig) -> Optional[float]:
  """bert_tf.utils.model_flops' count for one sequence of a pretraining experiment, or
  None for other tasks (the formula counts the masked-LM head)."""
  if experiment.task.name != "pretraining":
    return None
  encoder, data = experiment.model.encoder, experiment.train_data
  return model_flops.pretraining_flops_per_sequence(
      encoder.num_layers, encoder.hidden_size, encoder.intermediate_size,
      encoder.vocab_size, data.seq_length, data.max_predictions_per_seq)


def _gib(value: float) -> str:
  """Bytes in GiB, or MiB below one GiB."""
  return f"{value / 2**30:.2f} GiB" if value >= 2**30 else f"{value / 2**20:.1f} MiB"


@dataclasses.dataclass
class Report:
  """The report of a step compiled for a target (see the module docstring)."""

  experiment: configs.ExperimentConfig
  target: object  # targets.Target
  compiled: Compiled
  search: Optional[BatchSearch]
  kernels: object  # what the model was built with (None: the reference layers)

  @property
  def per_device_batch(self) -> float:
    return self.compiled.global_batch_size / self.target.chips

  def step_seconds(self):
    """(seconds, how it was estimated): the compiler's optimal_seconds where positive,
    else the roofline max(FLOPs / peak, bytes / bandwidth)."""
    c, t = self.compiled, self.target
    if c.optimal_seconds and c.optimal_seconds > 0:
      return c.optimal_seconds, "the compiler's estimate (optimal_seconds)"
    reason = ("the compiler gives no estimate" if c.optimal_seconds is None else
              f"the compiler's optimal_seconds is {c.optimal_seconds:g}, unusable")
    if c.flops:
      return (max(c.flops / t.peak_flops, c.bytes_accessed / t.memory_bandwidth),
              f"a roofline estimate ({reason}): max(FLOPs / peak, bytes accessed / "
              "bandwidth)")
    per_sequence = analytic_flops(self.experiment)
    if not per_sequence:
      return None, f"none ({reason}, nor a FLOP count)"
    return (per_sequence * self.per_device_batch / t.peak_flops,
            f"a lower bound ({reason}, nor a FLOP count): the analytic FLOPs at the "
            "published peak")

  def all_reduce_seconds(self) -> Optional[float]:
    """The all-reduces' time at the target's published chip-to-chip bandwidth, a lower
    bound (a ring sends and receives 2 (n - 1) / n of the bytes on each device, each
    way at once), or None where the target gives no bandwidth (targets.Target.
    interconnect_bandwidth) or there is nothing to reduce."""
    bandwidth, devices = self.target.interconnect_bandwidth, self.target.chips
    reduced = self._collectives.get("all-reduce")
    if not bandwidth or not reduced or devices < 2:
      return None
    return 2 * (devices - 1) / devices * reduced.bytes / bandwidth

  @functools.cached_property
  def _collectives(self) -> Dict[str, Collective]:
    """`collectives` of the compiled step's HLO text (read once: it runs to megabytes)."""
    return collectives(self.compiled.hlo)

  @functools.cached_property
  def figures(self) -> dict:
    """The report's numbers, for tests and tables (worked out once)."""
    c, t = self.compiled, self.target
    seconds, how = self.step_seconds()
    per_sequence = analytic_flops(self.experiment)
    found = self._collectives
    return {
        "target": t.name, "devices": t.chips, "global_batch_size": c.global_batch_size,
        "argument_bytes": c.argument_bytes, "temp_bytes": c.temp_bytes,
        "output_bytes": c.output_bytes, "alias_bytes": c.alias_bytes,
        "peak_bytes": c.peak_bytes, "device_memory_bytes": t.memory_bytes,
        "fits": c.peak_bytes <= t.memory_bytes,
        "largest_global_batch": self.search.largest if self.search else None,
        "flops_per_device": c.flops,
        "analytic_flops_per_device": (per_sequence * self.per_device_batch
                                      if per_sequence else None),
        "collectives": {op: (v.count, v.bytes) for op, v in found.items()},
        "custom_calls": dict(custom_calls(c.hlo)),
        "step_seconds": seconds, "step_seconds_from": how,
        "sequences_per_second_per_device": self.per_device_batch / seconds if seconds else None,
        # A bound from the analytic count at the peak is 100% by construction.
        "mfu": (per_sequence * self.per_device_batch / seconds / t.peak_flops
                if per_sequence and seconds and c.flops else None),
        "all_reduce_seconds": self.all_reduce_seconds(),
        "compile_seconds": c.compile_seconds,
    }

  def describe(self) -> List[str]:
    """The report, line by line."""
    f, c, t = self.figures, self.compiled, self.target
    lines = [f"{t.name}: {t.chips} x {t.chip} ({t.topology}"
             + (f", {t.slices} slices" if t.slices > 1 else "")
             + (f", {t.hosts} hosts" if t.hosts > 1 else "")
             + f"), data parallel; global batch {c.global_batch_size} "
             f"({self.per_device_batch:g} per device); compiled in {c.compile_seconds:.1f} s",
             f"Memory per device: arguments {_gib(c.argument_bytes)}, temporaries "
             f"{_gib(c.temp_bytes)}, outputs {_gib(c.output_bytes)} ({_gib(c.alias_bytes)} "
             f"of them in donated arguments), code {_gib(c.code_bytes)}: "
             f"{_gib(c.peak_bytes)} of {_gib(t.memory_bytes)}: "
             + ("fits" if f["fits"] else "DOES NOT FIT")]
    if self.search:
      s = self.search
      lines.append("Largest global batch that fits: " + (
          f"{s.largest}" if s.largest else "none tried fits")
          + (f" (the smallest tried that does not: {s.smallest_failing})"
             if s.smallest_failing else " (none tried failed: it may be larger)")
          + f"; {s.compiles} more compiles")
    flops_line = (f"FLOPs per device per step: {c.flops / 1e12:.3f} T (compiler's count)"
                  if c.flops else "FLOPs per device per step: the compiler gives no count")
    if f["analytic_flops_per_device"] and c.flops:
      ratio = c.flops / f["analytic_flops_per_device"]
      flops_line += (f"; the analytic matmul count (bert_tf.utils.model_flops) "
                     f"{f['analytic_flops_per_device'] / 1e12:.3f} T: ratio {ratio:.3f}")
    lines.append(flops_line)
    lines.append("Collectives: " + ("none" if not f["collectives"] else "; ".join(
        f"{count} {op} ({_gib(size)} in all)"
        for op, (count, size) in sorted(f["collectives"].items()))))
    if f["all_reduce_seconds"]:
      lines.append(f"  all-reduce at the published {t.figures['interconnect_gbs']} GB/s "
                   f"chip-to-chip (an estimate, a lower bound: a ring's 2(n-1)/n of the "
                   f"bytes each way): {f['all_reduce_seconds'] * 1e3:.2f} ms a step")
    elif t.slices > 1 or t.hosts > 1:
      lines.append("  all-reduce time: not estimated (it crosses the data-centre network "
                   "between slices or hosts)")
    for op, entry in sorted(self._collectives.items()):
      if op != "all-reduce":
        lines.append(f"  {op} from: " + ", ".join(
            f"{name} x{n}" for name, n in entry.sources.most_common(4)))
    lines.append(f"Kernels: the model was built with "
                 f"{self.kernels!r}" if self.kernels else
                 "Kernels: the reference layers (XLA fuses attention, LayerNorm and dropout)")
    lines.append("Custom calls in the compiled step: " + (", ".join(
        f"{name} x{n}" for name, n in sorted(f["custom_calls"].items())) or "none"))
    seconds, how = f["step_seconds"], f["step_seconds_from"]
    if not seconds:
      lines.append(f"Step time: {how}")
      return lines
    lines.append(f"Step time (an estimate, {how}): {seconds * 1e3:.2f} ms -> "
                 f"{'' if c.flops else 'at most '}"
                 f"{f['sequences_per_second_per_device']:.0f} sequences/s per device"
                 + (f", MFU {100 * f['mfu']:.0f}% of the published "
                    f"{t.peak_flops / 1e12:.0f} TFLOP/s" if f["mfu"] else ""))
    return lines
