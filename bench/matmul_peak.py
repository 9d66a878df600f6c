r"""The dense matmul rate of this machine, measured in the run that divides by it.

Every MFU figure in bench/ divides by the rate of a matrix product in the framework and
precision of what it times, measured in the same run on the same machine (interleaved
with the timed steps where there are rounds; the fastest round counts). No rate is read
from a file. The figures name the CPU's instruction sets (cpu_isa): AVX512_BF16 and AMX
run bf16 products several times the float32 rate.

The product is BERT's feed-forward one, [4096, 768] x [768, 3072] (32 x 128 tokens).
At import this module needs the standard library only: it also runs inside the peers'
virtual environments and on machines without TensorFlow; each product imports its own
framework.

  python -m bench.matmul_peak                                 # TensorFlow, 3 precisions
  python -m bench.matmul_peak --frameworks=tensorflow,jax,torch --dtypes=float32,bfloat16

With --serve it is a worker of the round protocol (bench/peers/protocol.py): one step is
the product repeated for about --step_seconds, and READY says the FLOPs of a step, so a
benchmark's driver runs it as one more system in its rounds (bench/pretraining_step.py).
"""

import argparse
import importlib
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, NamedTuple, Optional, Sequence, Set, Tuple

from bench.peers import protocol

FRAMEWORKS = ("tensorflow", "jax", "torch")
DTYPES = ("float32", "bfloat16", "float16", "int8")
# [rows, K] x [K, N]: BERT's feed-forward product at batch 32 x seq 128, BERT-base width.
SHAPE = (4096, 768, 3072)
# CPU flag -> the name the figures print, in that order: vector width first, then the
# bf16 / int8 instructions the products can use.
_ISA_NAMES = (
    ("avx512_bf16", "AVX512_BF16"), ("avx512_fp16", "AVX512_FP16"),
    ("avx512_vnni", "AVX512_VNNI"), ("avx_vnni", "AVX_VNNI"),
    ("amx_bf16", "AMX_BF16"), ("amx_int8", "AMX_INT8"), ("amx_fp16", "AMX_FP16"),
    ("sve", "SVE"), ("bf16", "BF16"), ("i8mm", "I8MM"),
)


def cpu_flags() -> Set[str]:
  """The CPU's feature flags, lower case: /proc/cpuinfo's `flags` (x86) or `Features`
  (Arm) line; where that file is absent, macOS's sysctl features; else an empty set."""
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
          return set(value.lower().split())
  except OSError:
    pass
  try:
    text = subprocess.run(["sysctl", "-n", "machdep.cpu.features",
                           "machdep.cpu.leaf7_features"], capture_output=True, text=True,
                          timeout=5, check=False).stdout
  except (OSError, subprocess.SubprocessError):
    return set()
  return {word.lower().replace(".", "_") for word in text.split()}


def cpu_isa(flags: Optional[Set[str]] = None) -> str:
  """The instruction sets the products can use, e.g. 'AVX-512, AVX512_BF16,
  AVX512_VNNI' or 'AVX2, AVX_VNNI' or 'AVX-512, AVX512_BF16, AMX_BF16, AMX_INT8'.

  Args:
    flags: lower-case CPU flags; default this machine's (cpu_flags).
  """
  flags = cpu_flags() if flags is None else flags
  if not flags:
    return f"ISA unknown ({platform.machine() or 'unknown machine'}, no CPU flags)"
  if "avx512f" in flags:
    names = ["AVX-512"]
  elif "avx2" in flags:
    names = ["AVX2"]
  elif "asimd" in flags:
    names = ["NEON"]
  else:
    names = ["no AVX2"]
  names += [name for flag, name in _ISA_NAMES if flag in flags]
  return ", ".join(names)


def cpu_model() -> str:
  """The CPU's model name (/proc/cpuinfo), else platform.processor(), else 'unknown CPU'."""
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or "unknown CPU"


def machine_description() -> str:
  """'AMD EPYC, 2 cores, AVX2': the CPU, its cores and the instruction sets its products
  use (the rates, and TensorFlow's own oneDNN choice, depend on them)."""
  return f"{cpu_model()}, {os.cpu_count()} cores, {cpu_isa()}"


class Product(NamedTuple):
  """One matrix product, ready to run.

  launch: starts the product (on an accelerator it may return before it is done).
  sync: waits until every launched product is done.
  flops: 2 x M x K x N per launch.
  framework: e.g. 'tensorflow 2.21.0'.
  dtype: one of DTYPES; int8 products accumulate in int32 (TensorFlow: on oneDNN's
    u8 x s8 GEMM where it can, its generic int8 kernel elsewhere; `framework` says which).
  """
  launch: Callable[[], None]
  sync: Callable[[], None]
  flops: float
  framework: str
  dtype: str

  def run(self) -> None:
    """One product, waited for."""
    self.launch()
    self.sync()


def _tensorflow_product(dtype: str, m: int, k: int, n: int) -> Product:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if dtype == "int8":
    a = tf.cast(tf.random.uniform([m, k], -127, 128, tf.int32), tf.int8)
    b = tf.cast(tf.random.uniform([k, n], -127, 128, tf.int32), tf.int8)
    onednn = _onednn_int8_matmul(n)
    if onednn is not None:
      # TensorFlow's fastest int8 product, the one --quantize=int8_onednn runs.
      a, mm, kernel = tf.bitcast(a, tf.quint8), onednn, " (oneDNN u8 x s8)"
    else:
      # What Keras's int8 Dense runs: int8 x int8 -> int32 on TensorFlow's generic kernel.
      mm = lambda a, b: tf.linalg.matmul(a, b, output_type=tf.int32)
      kernel = " (generic int8 x int8 -> int32)"
  else:
    a = tf.cast(tf.random.normal([m, k]), dtype)
    b = tf.cast(tf.random.normal([k, n]), dtype)
    mm, kernel = tf.linalg.matmul, ""
  # One element read back: the product is done, and the copy costs nothing.
  product = tf.function(lambda a, b: mm(a, b)[0, 0])
  out = []
  return Product(lambda: out.__setitem__(slice(None), [product(a, b)]),
                 lambda: out and out[0].numpy(), 2.0 * m * k * n,
                 f"tensorflow {tf.__version__}{kernel}", dtype)


def _onednn_int8_matmul(n: int):
  """uint8 [M, K] x int8 [K, n] -> float32 on oneDNN's int8 GEMM
  (bert_tf.export.int8_onednn's op), or None where this TensorFlow cannot run it."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.export import int8_onednn  # pylint: disable=g-import-not-at-top
  if not int8_onednn.available():
    return None
  bias = tf.zeros([n])
  return lambda a, b: tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
      a=a, b=tf.bitcast(b, tf.qint8), bias=bias, min_a=0.0, max_a=1.0, min_b=-1.0,
      max_b=1.0, min_freezed_output=0.0, max_freezed_output=0.0, Toutput=tf.float32,
      input_quant_mode="SCALED")


def _jax_product(dtype: str, m: int, k: int, n: int) -> Product:
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  key_a, key_b = jax.random.split(jax.random.PRNGKey(0))
  if dtype == "int8":
    a = jax.random.randint(key_a, (m, k), -127, 128, jnp.int8)
    b = jax.random.randint(key_b, (k, n), -127, 128, jnp.int8)
    product = jax.jit(lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.int32))
  else:
    a = jax.random.normal(key_a, (m, k), dtype)
    b = jax.random.normal(key_b, (k, n), dtype)
    product = jax.jit(lambda a, b: a @ b)
  out = []
  return Product(lambda: out.__setitem__(slice(None), [product(a, b)]),
                 lambda: out and out[0].block_until_ready(), 2.0 * m * k * n,
                 f"jax {jax.__version__}", dtype)


def _torch_product(dtype: str, m: int, k: int, n: int, device=None) -> Product:
  import torch  # pylint: disable=g-import-not-at-top
  device = torch.device(device or "cpu")
  generator = torch.Generator(device=device).manual_seed(0)
  if dtype == "int8":
    a = torch.randint(-127, 128, (m, k), dtype=torch.int8, device=device,
                      generator=generator)
    b = torch.randint(-127, 128, (k, n), dtype=torch.int8, device=device,
                      generator=generator)
  else:
    a = torch.randn(m, k, device=device, generator=generator).to(getattr(torch, dtype))
    b = torch.randn(k, n, device=device, generator=generator).to(getattr(torch, dtype))
  sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

  def launch():
    with torch.no_grad():
      torch.matmul(a, b)
  return Product(launch, sync, 2.0 * m * k * n, f"torch {torch.__version__}", dtype)


def product(framework: str, dtype: str, shape: Tuple[int, int, int] = SHAPE,
            torch_device=None) -> Product:
  """The [M, K] x [K, N] product of `shape` in `framework` (one of FRAMEWORKS) and
  `dtype` (one of DTYPES), on the framework's default device (torch: `torch_device`,
  default the CPU)."""
  if framework not in FRAMEWORKS or dtype not in DTYPES:
    raise ValueError(f"framework must be one of {FRAMEWORKS} and dtype one of {DTYPES}, "
                     f"got {framework!r}, {dtype!r}")
  m, k, n = shape
  if framework == "torch":
    return _torch_product(dtype, m, k, n, torch_device)
  return (_tensorflow_product if framework == "tensorflow" else _jax_product)(dtype, m, k, n)


def repeated(one: Product, seconds: float) -> Product:
  """`one` launched back to back as often as fills about `seconds` (at least once), then
  waited for once: a step of the round protocol. Runs `one` twice to measure it."""
  one.run()
  start = time.perf_counter()
  one.run()
  reps = max(1, math.ceil(seconds / max(time.perf_counter() - start, 1e-9)))

  def launch():
    for _ in range(reps):
      one.launch()
  return one._replace(launch=launch, flops=one.flops * reps)


def measure(one: Product, seconds: float = 0.3, rounds: int = 5) -> Dict[str, float]:
  """Times `rounds` rounds of `one` repeated for about `seconds` each.

  Returns:
    {"peak_flops_per_second": the fastest round's rate, "median_flops_per_second"}.
  """
  step = repeated(one, seconds)
  rates = []
  for _ in range(rounds):
    start = time.perf_counter()
    step.run()
    rates.append(step.flops / (time.perf_counter() - start))
  return {"peak_flops_per_second": max(rates),
          "median_flops_per_second": statistics.median(rates)}


def rate_of_steps(flops_per_step: float, step_seconds: Sequence[float]) -> Dict[str, float]:
  """The rate of a product timed as steps of a benchmark's rounds: FLOP/s at the fastest
  step (the peak every MFU divides by: on a shared machine the slower steps are the
  other work's) and at the median one."""
  return {"peak_flops_per_second": flops_per_step / min(step_seconds),
          "median_flops_per_second": flops_per_step / statistics.median(step_seconds)}


def describe(rate: Dict, framework: str, dtype: str) -> str:
  """'tensorflow 2.21.0 float32 matmul 190.2 GFLOP/s (median 180.1; AVX-512, ...)', for
  the notes under a table: `rate` holds peak_ and median_flops_per_second and, where
  known, isa."""
  isa = f"; {rate['isa']}" if rate.get("isa") else ""
  return (f"{framework} {dtype} matmul {rate['peak_flops_per_second'] / 1e9:,.1f} GFLOP/s "
          f"(median {rate['median_flops_per_second'] / 1e9:,.1f}{isa})")


def worker_argv(framework: str, dtype: str, python: str = sys.executable,
                threads: Sequence[str] = ()) -> list:
  """The command of a --serve worker of this module (see the module docstring)."""
  return [python, "-m", "bench.matmul_peak", "--serve", "--frameworks", framework,
          "--dtypes", dtype, *threads]


def _set_threads(args, framework: str) -> dict:
  """The threads the benchmarks' workers give `framework` (protocol.set_threads; torch:
  one per core), before its first op; jax keeps its own."""
  if framework == "jax":
    return {}
  return protocol.set_threads(args, importlib.import_module(framework))


def _serve(args) -> None:
  framework, dtype = args.frameworks[0], args.dtypes[0]
  threads = _set_threads(args, framework)
  torch_device = None
  if framework == "torch":
    import torch  # pylint: disable=g-import-not-at-top
    torch_device = "cuda" if torch.cuda.is_available() else "cpu"
  step = repeated(product(framework, dtype, torch_device=torch_device), args.step_seconds)
  protocol.serve(step.run, warmup_steps=1, info={
      **threads, "framework": step.framework, "dtype": dtype, "isa": cpu_isa(),
      "shape": "x".join(map(str, SHAPE)), "flops_per_step": step.flops})


def _parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--frameworks", type=lambda s: s.split(","), default=["tensorflow"],
                      help=f"Comma-separated, among {', '.join(FRAMEWORKS)}.")
  parser.add_argument("--dtypes", type=lambda s: s.split(","),
                      default=["float32", "bfloat16", "int8"],
                      help=f"Comma-separated, among {', '.join(DTYPES)}.")
  parser.add_argument("--rounds", type=int, default=5, help="Timed rounds; the fastest "
                      "(the peak) and the median are reported.")
  parser.add_argument("--seconds", type=float, default=0.5, help="Length of a round.")
  parser.add_argument("--serve", action="store_true", help="Be a worker of the round "
                      "protocol for the first framework and dtype (module docstring).")
  parser.add_argument("--step_seconds", type=float, default=0.3,
                      help="--serve: length of one step.")
  parser.add_argument("--intra_op_threads", type=int, default=0)
  parser.add_argument("--inter_op_threads", type=int, default=0)
  args = parser.parse_args(argv)
  for name in args.frameworks:
    if name not in FRAMEWORKS:
      parser.error(f"--frameworks: unknown '{name}'; among {', '.join(FRAMEWORKS)}")
  for name in args.dtypes:
    if name not in DTYPES:
      parser.error(f"--dtypes: unknown '{name}'; among {', '.join(DTYPES)}")
  return args


def main(argv=None) -> None:
  args = _parse_args(argv)
  if args.serve:
    _serve(args)
    return
  from bert_tf import cpu_kernels  # pylint: disable=g-import-not-at-top
  cpu_kernels.prefer_onednn()  # before TensorFlow loads: the kernels the tools run
  cpu_kernels.leave_out_absent_gpus()
  print(f"{machine_description()}; load average "
        f"{os.getloadavg()[0]:.1f}; [{'x'.join(map(str, SHAPE))}] products", flush=True)
  for framework in args.frameworks:
    _set_threads(args, framework)
    for dtype in args.dtypes:
      one = product(framework, dtype)
      rate = measure(one, args.seconds, args.rounds)
      print(f"  {describe(rate, one.framework, dtype)}", flush=True)
  print("command: python -m bench.matmul_peak " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
  main()
