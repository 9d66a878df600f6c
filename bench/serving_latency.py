r"""Serving latency and throughput of an exported BERT: raw text in vs. token ids in.

  python3 -m bench.serving_latency --size=base --seq_length=128 --iterations=50 \
      --batch_iterations=5

builds a classifier of the given size with random weights and a synthetic
30522-token vocab, exports it with bert_tf.export (as tools/export_saved_model does),
loads the SavedModel and times, on the same texts,
  * serving_default (raw strings: tokenization and packing in the graph), and
  * serve_token_ids (ids tokenized beforehand, as a client that tokenizes would),
  * the in-graph tokenization and packing alone (a tf.function, in process),
at batch 1 (p50 and p99 latency over --iterations calls) and at batch 32
(median throughput over --batch_iterations calls), the three interleaved call by call.
Texts are random words long enough to fill seq_length. The difference between the first
two rows is the cost of in-graph tokenization. It prints a table and the command line,
writes bench/results/serving_latency.json and its table (bench/results/serving_latency.md).
"""

import os
import resource
import shutil
import statistics
import tempfile
import time

from absl import app
from absl import flags

from bench import common

FLAGS = flags.FLAGS
common.define_shape_flags(batch_help="Batch size of the throughput measurement.")
flags.DEFINE_integer("iterations", 50, "Timed batch-1 calls per signature.")
flags.DEFINE_integer("batch_iterations", 5, "Timed batch-32 calls per signature.")
flags.DEFINE_integer("vocab_size", 30522, "Size of the synthetic vocab.")
flags.DEFINE_integer("seed", 0, "Seed of the texts and weights.")
flags.DEFINE_bool("write_readme", True, "Record the run: bench/results/serving_latency.json and its table.")


def synthetic_vocab(path, size):
  """Special tokens, letters, '##' letters, then letter pairs/triples up to `size`."""
  import itertools  # pylint: disable=g-import-not-at-top
  import string  # pylint: disable=g-import-not-at-top
  from bert_tf import constants  # pylint: disable=g-import-not-at-top
  letters = string.ascii_lowercase
  tokens = list(constants.SPECIAL_TOKENS) + list(letters) + ["##" + c for c in letters]
  for n in (2, 3):
    for combo in itertools.product(letters, repeat=n):
      word = "".join(combo)
      tokens += [word, "##" + word]
  tokens = tokens[:size]
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(tokens) + "\n")
  return path


def random_texts(count, words, seed):
  import random  # pylint: disable=g-import-not-at-top
  rng = random.Random(seed)
  return [" ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz")
                           for _ in range(rng.randint(2, 7))) for _ in range(words))
          for _ in range(count)]


def percentile(values, q):
  values = sorted(values)
  return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def main(argv):
  del argv
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  import keras  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  from bert_tf.export import exporter  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import base  # pylint: disable=g-import-not-at-top
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top

  tmp = tempfile.mkdtemp(prefix="serving_latency_")
  vocab = synthetic_vocab(os.path.join(tmp, "vocab.txt"), FLAGS.vocab_size)
  encoder = configs.EncoderConfig.from_size(FLAGS.size, vocab_size=FLAGS.vocab_size)
  data = {"seq_length": FLAGS.seq_length}
  experiment = experiments.experiment_from_dict({
      "task": {"name": "sentence_prediction", "num_classes": 2},
      "model": {"encoder": encoder.as_dict()}, "tokenizer": {"vocab_file": vocab},
      "train_data": data, "eval_data": data})
  keras.utils.set_random_seed(FLAGS.seed)
  print(f"Building and exporting a {FLAGS.size} classifier (seq_length {FLAGS.seq_length})",
        flush=True)
  start = time.time()
  model = base.get_task(experiment).build_model()
  module = exporter.build_serving_module(experiment, model, vocab)
  path = exporter.write_saved_model(module, os.path.join(tmp, "export"))
  print(f"Exported to {path} in {time.time() - start:.0f}s", flush=True)
  loaded = tf.saved_model.load(path)
  text_fn = loaded.signatures["serving_default"]
  ids_fn = loaded.signatures["serve_token_ids"]

  # ~0.8 words per piece budget keeps the texts at or above seq_length pieces.
  texts = random_texts(FLAGS.batch_size, FLAGS.seq_length, FLAGS.seed)
  ids = {k: v for k, v in module.text_encoder.encode(tf.constant(texts)).items()}
  fill = float(tf.reduce_mean(tf.cast(ids["input_mask"], tf.float32)))
  encode_fn = tf.function(module.encode_text,
                          input_signature=[{"text": tf.TensorSpec([None], tf.string)}])
  calls = {
      "raw text in": lambda n: text_fn(text=tf.constant(texts[:n])),
      "token ids in": lambda n: ids_fn(**{k: v[:n] for k, v in ids.items()}),
      "tokenize + pack only": lambda n: encode_fn({"text": tf.constant(texts[:n])}),
  }

  def timed(call, n):
    start = time.perf_counter()
    out = call(n)
    _ = {k: v.numpy() for k, v in out.items()}
    return time.perf_counter() - start

  for call in calls.values():
    for n in (1, 1, 1, FLAGS.batch_size):
      timed(call, n)
  # Interleaved: each round times every input once, so all share the same moments of a
  # possibly busy machine.
  latencies = {name: [] for name in calls}
  batch_seconds = {name: [] for name in calls}
  for i in range(FLAGS.iterations):
    for name, call in calls.items():
      latencies[name].append(timed(call, 1) * 1000)
  for i in range(FLAGS.batch_iterations):
    for name, call in calls.items():
      batch_seconds[name].append(timed(call, FLAGS.batch_size))
    print(f"  batch-{FLAGS.batch_size} round {i + 1}/{FLAGS.batch_iterations}", flush=True)

  devices = sorted({d.device_type for d in tf.config.list_logical_devices()})
  header = ["input", "batch-1 p50 (ms)", "batch-1 p99 (ms)",
            f"batch-{FLAGS.batch_size} throughput (seq/s, median)"]
  rows, results = [], {}
  for name in calls:
    p50, p99 = percentile(latencies[name], 50), percentile(latencies[name], 99)
    throughput = FLAGS.batch_size / statistics.median(batch_seconds[name])
    rows.append([name, f"{p50:.1f}", f"{p99:.1f}", f"{throughput:.1f}"])
    results[name] = {"p50_ms": p50, "p99_ms": p99, "throughput_seq_per_s": throughput}
  peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
  raw, token = results["raw text in"], results["token ids in"]
  summary = (f"BERT-{FLAGS.size} classifier, seq_length {FLAGS.seq_length} ({fill:.0%} of "
             f"positions are real tokens), devices {devices}, {common.machine_description()}, "
             f"load average {os.getloadavg()[0]:.1f} at the end; peak RSS {peak_mb:.0f} MB. "
             f"Raw text in costs {raw['p50_ms'] / token['p50_ms']:.2f}x the latency (p50) and "
             f"gives {raw['throughput_seq_per_s'] / token['throughput_seq_per_s']:.2f}x the "
             "throughput of token ids in.")
  table = common.markdown_table(header, rows)
  command = common.command_line()
  print(f"\n{summary}\n{table}\n\nCommand: {command}")
  common.write_results("serving_latency", {
      "command": command, "size": FLAGS.size, "seq_length": FLAGS.seq_length,
      "batch_size": FLAGS.batch_size, "iterations": FLAGS.iterations,
      "batch_iterations": FLAGS.batch_iterations, "results": results,
      "peak_rss_mb": peak_mb, "real_token_fraction": fill})
  if FLAGS.write_readme:
    common.update_table(
        "serving_latency", f"{summary}\n\n{table}\n\n`{command}`")
  shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
  app.run(main)
