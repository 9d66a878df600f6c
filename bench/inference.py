"""Encoder inference throughput (sequences/s, tokens/s, model GFLOP/s, MFU, peak RSS).

Times BertEncoder's forward pass (training=False) inside tf.function, with and without
XLA (jit_compile), and TensorFlow's float32 matrix product (bench/matmul_peak.py), the
three alternating round by round in one process: MFU divides each variant's model
FLOP/s by the product's rate of the same rounds.

  python -m bench.inference --size=base --batch_size=32 --seq_length=128
"""

import os
import time

from absl import app
from absl import flags

from bench import common
from bench import flops
from bench import matmul_peak
from bench import stats
from bench.peers import protocol

FLAGS = flags.FLAGS
common.define_shape_flags(batch_help="Sequences per call.")
flags.DEFINE_integer("rounds", 5, "Interleaved rounds.")
flags.DEFINE_integer("calls_per_round", 3, "Timed calls per variant per round.")
flags.DEFINE_string("device", "cpu", "cpu or gpu.")
flags.DEFINE_bool("write_readme", True, "Record the run: bench/results/inference.json and its table.")

HEADER = ["size", "batch x seq", "variant", "seq/s", "tokens/s", "model GFLOP/s", "MFU",
          "peak RSS MiB (process)"]
MATMUL = "matmul"


def measure(size, batch_size, seq_length, rounds, calls_per_round,
            matmul_shape=matmul_peak.SHAPE, matmul_seconds=0.3):
  """Times the encoder's forward pass (graph and xla) and the float32 product in turns.

  Returns:
    {"seconds": {variant or MATMUL: [seconds of each call]}, "model_flops": FLOPs of one
    forward call, "matmul": the product's rate (matmul_peak.rate_of_steps, with
    framework, dtype, isa), "utilisation": {variant: model FLOP/s over the product's}}.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  from bert_tf import constants  # pylint: disable=g-import-not-at-top
  from bert_tf.models import BertEncoder  # pylint: disable=g-import-not-at-top

  encoder = BertEncoder.from_config_object(configs.EncoderConfig.from_size(size))
  batch = protocol.pretraining_batch(batch_size, seq_length, 1)
  inputs = {k: tf.constant(batch[k]) for k in constants.ENCODER_INPUTS}

  def forward():
    return encoder(inputs, training=False)[constants.SEQUENCE_OUTPUT][0, 0, 0]

  graph, xla = tf.function(forward), tf.function(forward, jit_compile=True)
  product = matmul_peak.repeated(matmul_peak.product("tensorflow", "float32", matmul_shape),
                                 matmul_seconds)
  variants = {"graph": lambda: graph().numpy(), "xla": lambda: xla().numpy(),
              MATMUL: product.run}
  for fn in variants.values():
    fn()
  seconds = {name: [] for name in variants}
  for r in range(rounds):
    for name in stats.round_order(list(variants), r):
      for _ in range(calls_per_round):
        t0 = time.perf_counter()
        variants[name]()
        seconds[name].append(time.perf_counter() - t0)
  layers, hidden, _, intermediate = protocol.size_args(size)
  model_flops = batch_size * flops.encoder_forward_flops_per_sequence(
      layers, hidden, intermediate, seq_length)
  rate = dict(matmul_peak.rate_of_steps(product.flops, seconds[MATMUL]),
              framework=product.framework, dtype=product.dtype, isa=matmul_peak.cpu_isa(),
              shape="x".join(map(str, matmul_shape)))
  return {"seconds": seconds, "model_flops": model_flops, "matmul": rate,
          "utilisation": {name: flops.utilisation(model_flops / stats.median(values),
                                                  rate["peak_flops_per_second"])
                          for name, values in seconds.items() if name != MATMUL}}


def table_rows(size, batch_size, seq_length, result, rss_mb):
  """The table's rows (HEADER) of a `measure` result; MFU through flops.utilisation_text."""
  rows = []
  for name, fraction in result["utilisation"].items():
    step = stats.median(result["seconds"][name])
    rows.append([size, f"{batch_size}x{seq_length}", name, f"{batch_size / step:.1f}",
                 f"{batch_size * seq_length / step:.0f}",
                 f"{result['model_flops'] / step / 1e9:.1f}",
                 flops.utilisation_text(fraction), f"{rss_mb:.0f}"])
  return rows


def main(argv):
  del argv
  if FLAGS.device == "cpu":
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
  load = common.load_average()
  result = measure(FLAGS.size, FLAGS.batch_size, FLAGS.seq_length, FLAGS.rounds,
                   FLAGS.calls_per_round)
  rss = protocol.peak_rss_mb()
  rate = result["matmul"]
  table = common.markdown_table(HEADER, table_rows(FLAGS.size, FLAGS.batch_size,
                                                   FLAGS.seq_length, result, rss))
  command = common.command_line()
  note = (f"Command: `{command}`; {common.machine_description()}; MFU against "
          f"{matmul_peak.describe(rate, rate['framework'], rate['dtype'])} "
          f"[{rate['shape']}], timed in the same rounds; load average {load} at the start, "
          f"{common.load_average()} at the end.")
  print(table)
  print(note)
  common.write_results("inference", {"command": command, "seconds": result["seconds"],
                                     "peak_rss_mb": rss, "matmul": rate,
                                     "utilisation": result["utilisation"],
                                     "machine": common.machine_description()})
  if FLAGS.write_readme:
    common.update_table("inference", f"{note}\n\n{table}")
  print(f"inference: {FLAGS.size} {FLAGS.batch_size}x{FLAGS.seq_length}; command: {command}")


if __name__ == "__main__":
  app.run(main)
