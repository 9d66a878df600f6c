r"""Benchmarks create_pretraining_data on Beam's multi-processing DirectRunner against the
local tool: instances/s with 1 and 2 workers, and peak memory per process as the corpus grows.

Builds corpora of --repeats copies of --input_file, runs tools/create_pretraining_data.py
once per (path, worker count, repeat) in a fresh process, and polls the peak resident
memory (VmHWM) of the tool and each of its descendant processes (the local tool's worker
processes, or the Beam runner's SDK-harness workers). Every run of one corpus writes
--num_shards shards, whose SHA-256 is recorded: the local tool and the pipeline must
agree. Run it with a Python that has the `beam` extra; it prints one JSON line per run
(with the load average before it) and writes them to --output_json.

  python -m bench.beam_pretraining --data_dir=$BERT_TF_DATA --repeat=10 --workers=1,2 \
      --repeats=1,2,4
"""

import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from bench import common

FLAGS = flags.FLAGS
common.define_data_dir_flag()
common.define_corpus_flags()
flags.DEFINE_string("repeats", "1,2,4", "Corpus sizes, in copies of the input.")
flags.DEFINE_string("workers", "1,2", "Worker counts of the speed runs (on the corpus of "
                    "--repeat copies); the memory runs (--repeats) use 1 worker.")
flags.DEFINE_integer("repeat", 10, "Copies of the input in the speed runs' corpus.")
flags.DEFINE_integer("num_shards", 4, "The tool's --num_shards, in every run.")
flags.DEFINE_string("paths", "local,beam", "Which paths to run.")
flags.DEFINE_integer("dupe_factor", 5, "The tool's --dupe_factor.")
flags.DEFINE_float("chunk_size_mb", 4.0, "The tool's --chunk_size_mb.")
flags.DEFINE_string("output_json", "/tmp/beam_pretraining_bench.json", "Results file.")

_TOOL = os.path.join(common.REPO_ROOT, "tools", "create_pretraining_data.py")


def _descendants(pid):
  children = []
  try:
    for task in os.listdir(f"/proc/{pid}/task"):
      with open(f"/proc/{pid}/task/{task}/children") as f:
        children.extend(int(c) for c in f.read().split())
  except OSError:
    return []
  return children + [d for c in children for d in _descendants(c)]


def _peak_kb(pid):
  try:
    with open(f"/proc/{pid}/status") as f:
      for line in f:
        if line.startswith("VmHWM:"):
          return int(line.split()[1])
  except OSError:
    pass
  return None


def _children_cpu_seconds():
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def _run(path, workers, corpus, out):
  cmd = [sys.executable, _TOOL, f"--input_file={corpus}", f"--vocab_file={FLAGS.vocab_file}",
         f"--output={out}", "--overwrite", "--progress=false",
         f"--dupe_factor={FLAGS.dupe_factor}", f"--chunk_size_mb={FLAGS.chunk_size_mb}",
         f"--num_shards={FLAGS.num_shards}"]
  if path == "local":
    cmd.append(f"--num_workers={workers}")
  else:
    cmd += ["--runner=DirectRunner", "--", "--direct_running_mode=multi_processing",
            f"--direct_num_workers={workers}"]
  env = {**os.environ, "PYTHONPATH": common.REPO_ROOT, "TF_CPP_MIN_LOG_LEVEL": "2"}
  load = os.getloadavg()
  cpu = _children_cpu_seconds()
  start = time.time()
  proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
  peaks = {}
  while proc.poll() is None:
    for pid in [proc.pid] + _descendants(proc.pid):
      kb = _peak_kb(pid)
      if kb:
        peaks[pid] = max(peaks.get(pid, 0), kb)
    time.sleep(0.2)
  stdout, stderr = proc.communicate()
  wall = time.time() - start
  cpu = _children_cpu_seconds() - cpu
  if proc.returncode:
    raise RuntimeError(f"{' '.join(cmd)} failed:\n{stderr[-3000:]}")
  summary_file = out + ".json"
  with open(summary_file) as f:
    summary = json.load(f)
  main_mb = peaks.pop(proc.pid, 0) / 1024
  digest = hashlib.sha256()
  for shard in summary["output_files"]:
    with open(shard, "rb") as f:
      digest.update(f.read())
  return {"path": path, "workers": workers, "instances": summary["instances"],
          "chunks": summary["chunks"], "shards_sha256": digest.hexdigest(),
          "load_average_before": load,
          "input_mb": summary["input_bytes"] / 1e6, "wall_seconds": wall,
          "tool_seconds": summary["seconds"],
          # Every process of the run that was waited for (the tool and its workers), start-up
          # included: steadier than the wall clock on a shared machine.
          "cpu_seconds": cpu,
          "instances_per_second_wall": summary["instances"] / wall,
          "peak_mb_launcher": main_mb,
          "peak_mb_other_processes": sorted((kb / 1024 for kb in peaks.values()),
                                            reverse=True),
          "stdout": stdout.strip()[-300:]}


def main(argv):
  del argv
  common.resolve_corpus_flags()
  with open(FLAGS.input_file, encoding="utf-8") as f:
    text = f.read().rstrip("\n") + "\n\n"
  results = []
  with tempfile.TemporaryDirectory() as tmp:
    runs = [(p, w, FLAGS.repeat) for w in map(int, FLAGS.workers.split(","))
            for p in FLAGS.paths.split(",")]
    runs += [(p, 1, r) for r in map(int, FLAGS.repeats.split(",")) for p in FLAGS.paths.split(",")
             if r != FLAGS.repeat]
    for path, workers, repeat in runs:
      corpus = os.path.join(tmp, f"corpus{repeat}.txt")
      if not os.path.exists(corpus):
        with open(corpus, "w", encoding="utf-8") as f:
          f.write(text * repeat)
      result = _run(path, workers, corpus, os.path.join(tmp, "out", "pretrain"))
      result["repeat"] = repeat
      print(json.dumps(result), flush=True)
      results.append(result)
  with open(FLAGS.output_json, "w") as f:
    json.dump(results, f, indent=2)


if __name__ == "__main__":
  app.run(main)
