"""Encoder inference throughput (sequences/s, tokens/s, model GFLOP/s, MFU, peak RSS).

Times BertEncoder's forward pass (training=False) inside tf.function, with and without
XLA (jit_compile), alternating the two variants round by round in one process.

  python bench/inference.py --size=base --batch_size=32 --seq_length=128
"""

import os
import sys
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))

import common  # pylint: disable=g-import-not-at-top,wrong-import-position
import protocol  # pylint: disable=g-import-not-at-top,wrong-import-position
import stats  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_string("size", "base", "Encoder size.")
flags.DEFINE_integer("batch_size", 32, "Sequences per call.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("rounds", 5, "Interleaved rounds.")
flags.DEFINE_integer("calls_per_round", 3, "Timed calls per variant per round.")
flags.DEFINE_string("device", "cpu", "cpu or gpu.")
flags.DEFINE_bool("write_readme", True, "Update the inference section of bench/README.md.")


def main(argv):
  del argv
  if FLAGS.device == "cpu":
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  from bert_tf import constants  # pylint: disable=g-import-not-at-top
  from bert_tf.models import BertEncoder  # pylint: disable=g-import-not-at-top

  encoder = BertEncoder.from_config_object(configs.EncoderConfig.from_size(FLAGS.size))
  batch = protocol.pretraining_batch(FLAGS.batch_size, FLAGS.seq_length, 1)
  inputs = {k: tf.constant(batch[k]) for k in constants.ENCODER_INPUTS}

  def forward():
    return encoder(inputs, training=False)[constants.SEQUENCE_OUTPUT][0, 0, 0]

  variants = {"graph": tf.function(forward), "xla": tf.function(forward, jit_compile=True)}
  for fn in variants.values():
    fn().numpy()
  seconds = {name: [] for name in variants}
  for r in range(FLAGS.rounds):
    for name, fn in (variants.items() if r % 2 == 0 else reversed(variants.items())):
      for _ in range(FLAGS.calls_per_round):
        t0 = time.perf_counter()
        fn().numpy()
        seconds[name].append(time.perf_counter() - t0)
  layers, hidden, _, intermediate = protocol.size_args(FLAGS.size)
  t = FLAGS.seq_length
  flops = FLAGS.batch_size * t * layers * (2 * (4 * hidden * hidden + 2 * hidden * intermediate)
                                           + 4 * t * hidden)
  peak = common.matmul_peak_gflops()
  rss = protocol.peak_rss_mb()
  rows = []
  for name, values in seconds.items():
    step = stats.median(values)
    gflops = flops / step / 1e9
    rows.append([FLAGS.size, f"{FLAGS.batch_size}x{t}", name,
                 f"{FLAGS.batch_size / step:.1f}", f"{FLAGS.batch_size * t / step:.0f}",
                 f"{gflops:.1f}", f"{100 * gflops / peak:.0f}%" if peak else "n/a",
                 f"{rss:.0f}"])
  table = common.markdown_table(["size", "batch x seq", "variant", "seq/s", "tokens/s",
                                 "model GFLOP/s", "MFU", "peak RSS MiB (process)"], rows)
  print(table)
  command = common.command_line()
  common.write_results("inference", {"command": command, "seconds": seconds,
                                     "peak_rss_mb": rss, "matmul_peak_gflops": peak,
                                     "machine": common.machine_description()})
  if FLAGS.write_readme:
    common.update_readme_section("inference", f"Command: `{command}`\n\n{table}")
  print(f"inference: {FLAGS.size} {FLAGS.batch_size}x{t}; command: {command}")


if __name__ == "__main__":
  app.run(main)
