"""Where a training step's device time goes, from a profiler trace: the kernels' time per
step by category (GEMM, attention, scatter/gather, copies/transposes, optimizer, other
fusions) and the largest kernels, for bench/gpu_pretraining.py --profile.

Both profilers write the Chrome trace-event format (a JSON object with "traceEvents"):
jax.profiler.trace(..., create_perfetto_trace=True) its perfetto_trace.json.gz, and
torch.profiler's export_chrome_trace. The device's work is read from the trace:

  GPU     torch: the events of category kernel, gpu_memcpy and gpu_memset; jax: the
          events on the "Stream ..." lines of a "/device:GPU:N" process (its derived
          lines, "XLA Ops", "XLA Modules", "Steps", repeat the same time by HLO op);
  host    where there is no GPU (the CPU runs of the tests): the self time of torch's
          aten ops (cpu_op events; autograd and profiler scopes around them left out), or
          of the ops on the XLA CPU runtime's threads ("tf_XLA...").

Kernel times are summed, so kernels that overlap on several streams count in full:
the figures are the device's work, not its wall time. A category is assigned by
kernel name (`categorize`); attention counts only fused attention kernels (flash,
cuDNN, SDPA): attention computed as separate ops shows as GEMMs and fusions. XLA names
its fusions after their root op, so a JAX optimizer's update shows among the fusions.

Only the standard library: the worker of bench/gpu_pretraining.py imports it on
machines without TensorFlow, and the profilers themselves are imported by the capture
functions (`capture_jax`, `capture_torch`).

  python -m bench.kernel_profile TRACE.json[.gz] --steps=3     # a saved trace's table
"""

import argparse
import collections
import glob
import gzip
import json
import os
import re
import time
from typing import Dict, List, Sequence, Tuple

CATEGORIES = ("gemm", "attention", "scatter_gather", "copy_transpose", "optimizer",
              "other")
LABELS = {"gemm": "GEMM", "attention": "attention", "scatter_gather": "scatter/gather",
          "copy_transpose": "copies/transposes", "optimizer": "optimizer",
          "other": "other fusions"}
# First match wins: fused attention kernels are built with CUTLASS and named after
# their GEMMs, an embedding's gradient kernel may say "copy", an optimizer's "add".
_RULES = (
    ("optimizer", r"adam|lamb|multi_tensor_apply|_foreach_|optimizer"),
    ("attention", r"flash|fmha|sdpa|attention|attn"),
    ("scatter_gather", r"scatter|gather|index|embedding|dynamic.update.slice"),
    ("gemm", r"gemm|xmma|wmma|cutlass|cublas|nvjet|matmul|gemv|dot|s1681|tensorop|"
             r"(^|[^a-z])(add|b)?mm([^a-z]|$)"),
    ("copy_transpose", r"transpose|copy|memcpy|memset|concat|permute|contiguous|clone"),
)
_PATTERNS = tuple((category, re.compile(pattern)) for category, pattern in _RULES)
_TORCH_GPU = ("kernel", "gpu_memcpy", "gpu_memset")
_NAME_LENGTH = 160


def categorize(name: str) -> str:
  """The category (one of CATEGORIES) of a kernel or op name, e.g.
  'input_scatter_fusion_1' -> 'scatter_gather', 'sm90_xmma_gemm_bf16...' -> 'gemm',
  'loop_add_fusion' -> 'other'."""
  lowered = name.lower()
  for category, pattern in _PATTERNS:
    if pattern.search(lowered):
      return category
  return "other"


def read_trace(path: str) -> dict:
  """A trace file (.json or .json.gz) as {"traceEvents": [...]}."""
  opener = gzip.open if path.endswith(".gz") else open
  with opener(path, "rt") as f:
    trace = json.load(f)
  return trace if isinstance(trace, dict) else {"traceEvents": trace}


def _names(events) -> Tuple[Dict, Dict]:
  """({pid: process name}, {(pid, tid): thread name}) from the metadata events."""
  processes, threads = {}, {}
  for e in events:
    if e.get("ph") != "M":
      continue
    if e.get("name") == "process_name":
      processes[e.get("pid")] = str(e.get("args", {}).get("name", ""))
    elif e.get("name") == "thread_name":
      threads[(e.get("pid"), e.get("tid"))] = str(e.get("args", {}).get("name", ""))
  return processes, threads


def self_times(events: Sequence[dict]) -> List[dict]:
  """Copies of `events` whose "dur" is their self time: their duration less that of the
  events of their thread nested directly inside them (so that nested ops, aten::linear
  around aten::addmm, an XLA while loop around its body, count once)."""
  by_thread = collections.defaultdict(list)
  for e in events:
    by_thread[(e.get("pid"), e.get("tid"))].append(dict(e))
  out = []
  for thread in by_thread.values():
    thread.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
    open_events = []  # The enclosing events of the current one, innermost last.
    for event in thread:
      start = float(event["ts"])
      while open_events and float(open_events[-1]["ts"]) + open_events[-1]["total"] <= start:
        open_events.pop()
      event["total"] = float(event["dur"])
      if open_events:
        open_events[-1]["dur"] = float(open_events[-1]["dur"]) - event["total"]
      open_events.append(event)
      out.append(event)
  for event in out:
    del event["total"]
  return out


def _is_host_op(event: dict, thread: str) -> bool:
  """Whether a CPU trace event is an op's work, not a runtime scope around ops: torch's
  aten ops (not its autograd::engine or profiler scopes), the XLA CPU runtime's ops."""
  name = event["name"]
  if event.get("cat") == "cpu_op":
    return "::" not in name or name.startswith("aten::")
  return thread.startswith("tf_XLA") and "::" not in name and not name.startswith("end: ")


def device_events(trace: dict) -> Tuple[List[dict], str]:
  """The events of the device's work in a trace, and where they were found: "gpu", or
  "host" when the trace holds no GPU work (see the module docstring)."""
  events = trace.get("traceEvents", [])
  processes, threads = _names(events)
  complete = [e for e in events if e.get("ph") == "X" and "dur" in e and "ts" in e]

  def thread(e):
    return threads.get((e.get("pid"), e.get("tid")), "")

  gpu = [e for e in complete if e.get("cat") in _TORCH_GPU or (
      processes.get(e.get("pid"), "").startswith("/device:GPU")
      and thread(e).startswith("Stream"))]
  if gpu:
    return gpu, "gpu"
  host = [e for e in complete if _is_host_op(e, thread(e))]
  return self_times(host), "host"


def summarize(trace: dict, steps: int, top: int = 10) -> dict:
  """The device time of `steps` profiled steps, per step: in total, by category, and of
  the `top` kernels with the most time (by name).

  Returns:
    {"source": "gpu" | "host", "steps", "device_ms_per_step", "kernels_per_step",
     "categories_ms_per_step": {category: ms} (every one of CATEGORIES),
     "top_kernels": [{"name", "category", "ms_per_step", "calls_per_step"}, ...]}.
  """
  events, source = device_events(trace)
  time_us, calls = collections.Counter(), collections.Counter()
  for e in events:
    time_us[e["name"]] += float(e["dur"])
    calls[e["name"]] += 1
  categories = dict.fromkeys(CATEGORIES, 0.0)
  for name, microseconds in time_us.items():
    categories[categorize(name)] += microseconds / 1e3 / steps
  return {"source": source, "steps": steps,
          "device_ms_per_step": sum(time_us.values()) / 1e3 / steps,
          "kernels_per_step": len(events) / steps,
          "categories_ms_per_step": categories,
          "top_kernels": [{"name": name[:_NAME_LENGTH], "category": categorize(name),
                           "ms_per_step": microseconds / 1e3 / steps,
                           "calls_per_step": calls[name] / steps}
                          for name, microseconds in time_us.most_common(top)]}


def back_to_back_seconds(step, sync, steps: int) -> float:
  """Wall seconds per step of `steps` calls of `step` dispatched back to back, then one
  `sync()`."""
  start = time.perf_counter()
  for _ in range(steps):
    step()
  sync()
  return (time.perf_counter() - start) / steps


def capture_jax(step, sync, steps: int, directory: str) -> Tuple[str, float]:
  """Runs `steps` steps back to back under jax.profiler; returns (the perfetto trace's
  path, wall seconds per step)."""
  import jax  # pylint: disable=g-import-not-at-top
  with jax.profiler.trace(directory, create_perfetto_trace=True):
    seconds = back_to_back_seconds(step, sync, steps)
  traces = glob.glob(os.path.join(directory, "**", "perfetto_trace.json.gz"),
                     recursive=True)
  if not traces:
    raise RuntimeError(f"jax.profiler wrote no perfetto trace under {directory}")
  return max(traces, key=os.path.getmtime), seconds


def capture_torch(step, sync, steps: int, directory: str, cuda: bool) -> Tuple[str, float]:
  """Runs `steps` steps back to back under torch.profiler (the CPU, and CUDA when
  `cuda`); returns (its Chrome trace's path, wall seconds per step)."""
  from torch import profiler  # pylint: disable=g-import-not-at-top
  activities = [profiler.ProfilerActivity.CPU]
  if cuda:
    activities.append(profiler.ProfilerActivity.CUDA)
  with profiler.profile(activities=activities) as recorded:
    seconds = back_to_back_seconds(step, sync, steps)
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, "torch_trace.json.gz")
  recorded.export_chrome_trace(path)
  return path, seconds


def table(summary: dict) -> str:
  """A summary as lines of text: the categories, then the largest kernels."""
  total = summary["device_ms_per_step"]
  lines = [f"{summary['source']} time per step {total:.2f} ms over "
           f"{summary['kernels_per_step']:.0f} kernels"]
  for category, ms in summary["categories_ms_per_step"].items():
    lines.append(f"  {LABELS[category]:<18} {ms:9.3f} ms  {100 * ms / max(total, 1e-9):5.1f}%")
  for kernel in summary["top_kernels"]:
    lines.append(f"  {kernel['ms_per_step']:9.3f} ms  x{kernel['calls_per_step']:<6g} "
                 f"[{LABELS[kernel['category']]}] {kernel['name']}")
  return "\n".join(lines)


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("trace", help="A jax perfetto trace or a torch Chrome trace.")
  parser.add_argument("--steps", type=int, default=1, help="Steps the trace recorded.")
  parser.add_argument("--top", type=int, default=10)
  args = parser.parse_args(argv)
  print(table(summarize(read_trace(args.trace), args.steps, args.top)))


if __name__ == "__main__":
  main()
