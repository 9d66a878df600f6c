"""Measures this machine's dense float32 matmul rate with TensorFlow (GFLOP/s).

The model-FLOPs-utilization figures of the other benchmarks divide by this number.
Runs square and BERT-shaped matmuls ([tokens, H] x [H, 4H]) and reports the best median
over shapes; the machine is shared, so each shape is timed in several rounds and the
median of the rounds is kept.

  python bench/matmul_peak.py --rounds=5
"""

import json
import statistics
import sys
import time

from absl import app
from absl import flags

sys.path.insert(0, __file__.rsplit("/", 1)[0])

import common  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_integer("rounds", 5, "Timed rounds per shape; the median is kept.")
flags.DEFINE_float("min_seconds", 0.5, "Each round repeats the matmul for at least this long.")
flags.DEFINE_string("device", "CPU", "Device to measure, e.g. CPU or GPU.")
flags.DEFINE_bool("write_readme", True, "Update the matmul section of bench/README.md.")

# (m, k, n): square, and the FFN / QKV shapes of BERT at 4096 tokens.
SHAPES = [(2048, 2048, 2048), (4096, 768, 3072), (4096, 3072, 768), (4096, 768, 768),
          (4096, 256, 1024)]


def measure(m, k, n, rounds, min_seconds, device):
  """Median GFLOP/s of tf.matmul([m, k], [k, n]) on `device`."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  with tf.device(device):
    a = tf.random.normal([m, k])
    b = tf.random.normal([k, n])

    @tf.function
    def mm(a, b):
      return tf.reduce_sum(tf.matmul(a, b)[0, :1])

    mm(a, b).numpy()
    rates = []
    for _ in range(rounds):
      reps, start = 0, time.perf_counter()
      while True:
        mm(a, b).numpy()
        reps += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
          break
      rates.append(2.0 * m * k * n * reps / elapsed / 1e9)
  return statistics.median(rates), max(rates)


def peak_gflops(rounds=3, min_seconds=0.3, device="CPU"):
  """(best median GFLOP/s over SHAPES, {shape: (median, max)})."""
  per_shape = {}
  for m, k, n in SHAPES:
    per_shape[f"{m}x{k}x{n}"] = measure(m, k, n, rounds, min_seconds, device)
  return max(v[0] for v in per_shape.values()), per_shape


def main(argv):
  del argv
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  peak, per_shape = peak_gflops(FLAGS.rounds, FLAGS.min_seconds, FLAGS.device)
  rows = []
  for shape, (med, best) in per_shape.items():
    print(f"  matmul {shape}: median {med:.1f} GFLOP/s, best {best:.1f}", flush=True)
    rows.append([shape, f"{med:.1f}", f"{best:.1f}"])
  command = common.command_line()
  payload = {"peak_gflops": peak, "per_shape": per_shape, "command": command,
             "machine": common.machine_description(), "tensorflow": tf.__version__}
  common.write_results("matmul_peak", payload)
  if FLAGS.write_readme:
    common.update_readme_section(
        "matmul_peak",
        f"Machine: {payload['machine']}, TF {tf.__version__}. Command: `{command}`\n\n" +
        common.markdown_table(["shape m x k x n", "median GFLOP/s", "best GFLOP/s"], rows) +
        f"\n\nPeak used for MFU: **{peak:.1f} GFLOP/s** (best median over shapes).")
  print(f"matmul peak: {peak:.1f} GFLOP/s (best median over {len(SHAPES)} shapes); "
        f"command: {command}")


if __name__ == "__main__":
  app.run(main)
