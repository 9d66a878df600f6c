r"""Benchmarks tools/create_pretraining_data.py: instances/s, MB/s and peak memory.

Builds a corpus of --repeat copies of --input_file in a temporary folder, then runs the
tool --runs times for each worker count in --workers, each run a fresh process, and
prints per run and the median: instances/s (wall clock), MB/s, CPU seconds, and the peak
resident memory of the largest process (the parent or a worker). The machine this runs on
may be shared: wall-clock rates move with other load; CPU seconds move less.

  python bench/create_pretraining_data.py \
      --input_file=/work/shared/data/wikitext2_raw/wikitext2_valid_test.bertfmt.txt \
      --vocab_file=/work/shared/data/bert_vocab/uncased/vocab.txt \
      --repeat=10 --workers=1,2 --runs=2 --dupe_factor=5
"""

import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Text in the tool's input format.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocab.")
flags.DEFINE_integer("repeat", 10, "Copies of the input concatenated into the corpus.")
flags.DEFINE_string("workers", "1,2", "Comma-separated worker counts to measure.")
flags.DEFINE_integer("runs", 2, "Runs per worker count (the median is reported).")
flags.DEFINE_integer("dupe_factor", 5, "The tool's --dupe_factor.")
flags.DEFINE_integer("max_seq_length", 128, "The tool's --max_seq_length.")
flags.DEFINE_float("chunk_size_mb", 4.0, "The tool's --chunk_size_mb.")

_TOOL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools",
                     "create_pretraining_data.py")


def _run_once(corpus, out_dir, workers):
  output = os.path.join(out_dir, f"w{workers}", "pretrain")
  cmd = [sys.executable, _TOOL, f"--input_file={corpus}", f"--vocab_file={FLAGS.vocab_file}",
         f"--output={output}", f"--max_seq_length={FLAGS.max_seq_length}",
         f"--dupe_factor={FLAGS.dupe_factor}", f"--num_workers={workers}",
         f"--num_shards={max(workers, 1)}", f"--chunk_size_mb={FLAGS.chunk_size_mb}",
         "--overwrite", "--noprogress"]
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  start = time.time()
  subprocess.run(cmd, check=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
                 stdout=subprocess.DEVNULL)
  wall = time.time() - start
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  with open(output + ".json") as f:
    summary = json.load(f)
  cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
  return {
      "instances": summary["instances"],
      "wall_s": wall,
      "work_s": summary["seconds"],
      "instances_per_s": summary["instances"] / wall,
      "mb_per_s": summary["input_bytes"] / 1e6 / wall,
      "cpu_s": cpu,
      # ru_maxrss of children is the largest single child (KB on Linux).
      "peak_rss_mb": after.ru_maxrss / 1024,
      "cmd": " ".join(shlex.quote(c) for c in cmd),
  }


def main(argv):
  del argv
  if not FLAGS.input_file or not FLAGS.vocab_file:
    raise app.UsageError("--input_file and --vocab_file are required")
  with tempfile.TemporaryDirectory() as tmp:
    corpus = os.path.join(tmp, "corpus.txt")
    with open(FLAGS.input_file, "rb") as f:
      data = f.read()
    with open(corpus, "wb") as f:
      for _ in range(FLAGS.repeat):
        f.write(data.rstrip(b"\n") + b"\n\n")
    size_mb = os.path.getsize(corpus) / 1e6
    print(f"corpus: {FLAGS.repeat} x {FLAGS.input_file} = {size_mb:.1f} MB; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for workers in [int(w) for w in FLAGS.workers.split(",")]:
      results = []
      for r in range(FLAGS.runs):
        res = _run_once(corpus, tmp, workers)
        results.append(res)
        print(f"workers={workers} run {r + 1}: {res['instances']:,} instances in "
              f"{res['wall_s']:.1f} s wall ({res['work_s']:.1f} s after start-up): "
              f"{res['instances_per_s']:,.0f} instances/s, {res['mb_per_s']:.2f} MB/s, "
              f"{res['cpu_s']:.1f} CPU s, peak RSS {res['peak_rss_mb']:.0f} MB")
      print(f"workers={workers} median: "
            f"{statistics.median(r['instances_per_s'] for r in results):,.0f} instances/s, "
            f"{statistics.median(r['mb_per_s'] for r in results):.2f} MB/s, "
            f"{statistics.median(r['cpu_s'] for r in results):.1f} CPU s, peak RSS "
            f"{statistics.median(r['peak_rss_mb'] for r in results):.0f} MB")
      print(f"  command: {results[0]['cmd']}")


if __name__ == "__main__":
  app.run(main)
