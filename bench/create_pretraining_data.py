r"""Benchmarks tools/create_pretraining_data.py: instances/s, MB/s, CPU time and peak memory.

Builds a corpus of --repeat copies of --input_file in a temporary folder, then runs the
tool --runs rounds; each round runs every worker count in --workers (the order reverses
every other round, each run a fresh process) and one single-worker run on a corpus of
--memory_check_repeat copies, which shows whether peak memory grows with the corpus. Per
run it records the wall clock, the tool's start-up (until every worker has TensorFlow
imported and its tokenizer built), CPU seconds and the peak resident memory of the largest
process of the run (the parent or a worker). It prints and records the medians, the
2-worker/1-worker speed-up paired within each round, the corpus statistics of the JSON
summary, and regenerates its section of bench/README.md.

The machine may be shared: wall-clock rates move with other load, CPU seconds move less;
the load average is recorded before every run.

  python -m bench.create_pretraining_data --data_dir=$BERT_TF_DATA \
      --repeat=10 --workers=1,2 --runs=3 --dupe_factor=5
"""

import json
import os
import shlex
import statistics
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
flags.DEFINE_integer("repeat", 10, "Copies of the input concatenated into the corpus.")
flags.DEFINE_string("workers", "1,2", "Comma-separated worker counts to measure.")
flags.DEFINE_integer("runs", 2, "Rounds; every worker count runs once per round.")
flags.DEFINE_integer("memory_check_repeat", 1,
                     "Copies of the input in the corpus of the extra single-worker run of "
                     "every round that compares peak memory with the large corpus; 0 skips "
                     "it.")
flags.DEFINE_integer("dupe_factor", 5, "The tool's --dupe_factor.")
flags.DEFINE_integer("max_seq_length", 128, "The tool's --max_seq_length.")
flags.DEFINE_float("chunk_size_mb", 4.0, "The tool's --chunk_size_mb.")
flags.DEFINE_float("target_instances_per_second", 8500,
                   "Single-worker target (10x the original release's ~850 instances/s "
                   "after start-up on this machine).")
flags.DEFINE_bool("write_readme", True, "Regenerate this benchmark's README section.")

_TOOL = os.path.join(common.REPO_ROOT, "tools", "create_pretraining_data.py")
_SECTION = "create_pretraining_data"
# The original release's tool on the 2.36 MB WikiText file, uncased, seq 128, dupe 5, on
# this machine (2 cores): 37.9 s for 26,287 instances.
_ORIGINAL = "37.9 s for 26,287 instances, about 850 instances/s after start-up"


def _make_corpus(path, copies):
  with open(FLAGS.input_file, "rb") as f:
    data = f.read().rstrip(b"\n") + b"\n\n"
  with open(path, "wb") as f:
    for _ in range(copies):
      f.write(data)
  return os.path.getsize(path)


def _run_once(name, corpus, out_dir, workers):
  """One run of the tool in a fresh process; its figures as a dict."""
  output = os.path.join(out_dir, name, "pretrain")
  cmd = [sys.executable, _TOOL, f"--input_file={corpus}", f"--vocab_file={FLAGS.vocab_file}",
         f"--output={output}", f"--seq_length={FLAGS.max_seq_length}",
         f"--dupe_factor={FLAGS.dupe_factor}", f"--num_workers={workers}",
         f"--num_shards={workers}", f"--chunk_size_mb={FLAGS.chunk_size_mb}",
         "--overwrite", "--noprogress"]
  load = os.getloadavg()[0]
  start = time.time()
  proc = subprocess.Popen(cmd, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  # wait4's usage covers the tool and the workers it waited for; ru_maxrss is the
  # largest single process of this run (KB on Linux).
  stderr = proc.stderr.read()
  _, status, usage = os.wait4(proc.pid, 0)
  wall = time.time() - start
  proc.returncode = os.waitstatus_to_exitcode(status)
  if proc.returncode:
    raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                     f"{stderr.decode(errors='replace')[-3000:]}")
  with open(output + ".json") as f:
    summary = json.load(f)
  return {
      "name": name,
      "workers": workers,
      "instances": summary["instances"],
      "input_bytes": summary["input_bytes"],
      "wall_s": wall,
      "startup_s": summary["startup_seconds"],
      "instances_per_s": summary["instances"] / wall,
      "instances_per_s_after_startup": summary["instances_per_second_after_startup"],
      "mb_per_s": summary["input_bytes"] / 1e6 / wall,
      "cpu_s": usage.ru_utime + usage.ru_stime,
      "work_cpu_s": summary["work_cpu_seconds"],
      "critical_work_cpu_s": max(summary["work_cpu_seconds_per_worker"]),
      "instances_per_work_cpu_s": summary["instances"] / summary["work_cpu_seconds"],
      "peak_rss_mb": usage.ru_maxrss / 1024,
      "load_average": load,
      "summary": summary,
      "cmd": " ".join(shlex.quote(c) for c in cmd),
  }


# A pure-Python CPU loop of about a second: run alone and as two processes at once, it
# measures how much of a second core the machine has free at that moment, the ceiling of
# any 2-worker speed-up then.
_PROBE = "s = 0\nfor i in range(20_000_000):\n  s += i"


def _probe_parallel_speedup(processes):
  """Speed-up of `processes` concurrent copies of the CPU loop over one copy."""
  def run(n):
    start = time.time()
    procs = [subprocess.Popen([sys.executable, "-c", _PROBE]) for _ in range(n)]
    for p in procs:
      p.wait()
    return time.time() - start
  alone = run(1)
  together = run(processes)
  return processes * alone / together


def _medians(results):
  keys = ("wall_s", "startup_s", "instances_per_s", "instances_per_s_after_startup",
          "mb_per_s", "cpu_s", "work_cpu_s", "instances_per_work_cpu_s")
  out = {k: statistics.median(r[k] for r in results) for k in keys}
  out["peak_rss_mb"] = max(r["peak_rss_mb"] for r in results)
  out["instances"] = results[0]["instances"]
  out["input_mb"] = results[0]["input_bytes"] / 1e6
  out["runs"] = len(results)
  return out


def _statistics(summary):
  fractions = summary["masked_outcome_fractions"]
  return {
      "masked_fraction_of_non_special": summary["masked_fraction_of_non_special"],
      "mask": fractions["mask"], "random": fractions["random"], "kept": fractions["kept"],
      "next_sentence_random_fraction": summary["next_sentence_random_fraction"],
      "single_sentence_chunk_fraction": summary["single_sentence_chunk_fraction"],
      # One-sentence chunks always take a random B; the coin decides the others.
      "random_next_of_multi_sentence_chunks":
          (summary["next_sentence_random_fraction"] - summary["single_sentence_chunk_fraction"])
          / max(1 - summary["single_sentence_chunk_fraction"], 1e-9),
      "short_target_document_pass_fraction": summary["short_target_document_pass_fraction"],
      "short_target_instance_fraction": summary["short_target_instance_fraction"],
      "truncated_instance_fraction": summary["truncated_instance_fraction"],
      "invalid_utf8_replacements": summary["invalid_utf8_replacements"],
  }


def _markdown(payload):
  m = payload["medians"]
  rows = []
  for name, med in m.items():
    rows.append([name, f"{med['input_mb']:.1f}", f"{med['instances']:,}", med["runs"],
                 f"{med['wall_s']:.1f}", f"{med['startup_s']:.1f}",
                 f"{med['instances_per_s']:,.0f}", f"{med['instances_per_s_after_startup']:,.0f}",
                 f"{med['mb_per_s']:.2f}", f"{med['cpu_s']:.1f}", f"{med['work_cpu_s']:.1f}",
                 f"{med['instances_per_work_cpu_s']:,.0f}", f"{med['peak_rss_mb']:.0f}"])
  table = common.markdown_table(
      ["run", "corpus MB", "instances", "runs", "wall s", "start-up s", "instances/s",
       "instances/s after start-up", "MB/s", "CPU s", "work CPU s",
       "instances per work CPU s", "peak RSS MB"], rows)
  s = payload["statistics"]
  lines = [
      f"`{payload['command']}`",
      "",
      f"{payload['machine']}; load average {payload['load_min']:.1f}-{payload['load_max']:.1f} "
      f"before the runs (other jobs were running). Corpus: {payload['repeat']} copies of "
      f"`{os.path.basename(payload['input_file'])}`, uncased vocab, seq "
      f"{payload['max_seq_length']}, dupe_factor {payload['dupe_factor']}, chunks of "
      f"{payload['chunk_size_mb']} MiB. Medians over the rounds; peak RSS is the largest "
      f"process of any run (parent or worker). `instances/s` is end to end, start-up "
      f"(Python, TensorFlow import, tokenizer) included; `CPU s` is every process of the "
      f"run, start-up included; `work CPU s` is the CPU time of the chunks' processing "
      f"only (all workers), the steadiest figure on a loaded machine.",
      "",
      table,
      "",
  ]
  for line in payload["findings"]:
    lines.append(f"- {line}")
  lines += [
      f"- Statistics of the single-worker run (its JSON summary): masked "
      f"{100 * s['masked_fraction_of_non_special']:.2f}% of non-special tokens; of the "
      f"masked positions {100 * s['mask']:.1f}% [MASK] / {100 * s['random']:.1f}% random / "
      f"{100 * s['kept']:.1f}% kept; random next segment "
      f"{100 * s['next_sentence_random_fraction']:.1f}% "
      f"(one-sentence chunks, {100 * s['single_sentence_chunk_fraction']:.1f}% of instances, "
      f"always take a random B as in the original, so the expected share is "
      f"{100 * (0.5 + 0.5 * s['single_sentence_chunk_fraction']):.1f}%; among chunks of "
      f"two or more sentences {100 * s['random_next_of_multi_sentence_chunks']:.1f}%); "
      f"shortened target "
      f"in {100 * s['short_target_document_pass_fraction']:.1f}% of document passes "
      f"(short_seq_prob 10%), {100 * s['short_target_instance_fraction']:.1f}% of instances; "
      f"{s['invalid_utf8_replacements']} invalid UTF-8 sequences replaced.",
      f"- The original release's tool on this machine, one copy of the corpus: {_ORIGINAL}.",
  ]
  return "\n".join(lines)


def main(argv):
  del argv
  common.resolve_corpus_flags()
  worker_counts = [int(w) for w in FLAGS.workers.split(",")]
  with tempfile.TemporaryDirectory() as tmp:
    corpus = os.path.join(tmp, "corpus.txt")
    size_mb = _make_corpus(corpus, FLAGS.repeat) / 1e6
    systems = [(f"{w} worker{'s' if w > 1 else ''}", corpus, w) for w in worker_counts]
    if FLAGS.memory_check_repeat:
      small = os.path.join(tmp, "small.txt")
      small_mb = _make_corpus(small, FLAGS.memory_check_repeat) / 1e6
      systems.append((f"1 worker, {FLAGS.memory_check_repeat}x corpus", small, 1))
    print(f"corpus: {FLAGS.repeat} x {FLAGS.input_file} = {size_mb:.1f} MB; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    results = {name: [] for name, _, _ in systems}
    probes = []
    max_workers = max(worker_counts)
    for r in range(FLAGS.runs):
      if max_workers > 1:
        probes.append(_probe_parallel_speedup(max_workers))
        print(f"round {r + 1}: {max_workers} CPU-loop processes run {probes[-1]:.2f}x "
              f"as fast as one (the machine's free parallelism now)", flush=True)
      order = systems if r % 2 == 0 else list(reversed(systems))
      for name, path, workers in order:
        res = _run_once(f"r{r}-{workers}-{os.path.basename(path)}", path, tmp, workers)
        results[name].append(res)
        print(f"round {r + 1} {name}: {res['instances']:,} instances in {res['wall_s']:.1f} s "
              f"(start-up {res['startup_s']:.1f} s): {res['instances_per_s']:,.0f} instances/s, "
              f"{res['instances_per_s_after_startup']:,.0f} after start-up, "
              f"{res['mb_per_s']:.2f} MB/s, {res['cpu_s']:.1f} CPU s "
              f"({res['work_cpu_s']:.1f} s of work), peak RSS "
              f"{res['peak_rss_mb']:.0f} MB (load {res['load_average']:.1f})", flush=True)

  medians = {name: _medians(rs) for name, rs in results.items()}
  findings = []
  one = medians.get("1 worker")
  if one:
    target = FLAGS.target_instances_per_second
    findings.append(
        f"One worker: {one['instances_per_s_after_startup']:,.0f} instances/s after start-up "
        f"({one['instances_per_s_after_startup'] / target:.1f}x the {target:,.0f} target), "
        f"{one['instances_per_s']:,.0f} end to end; "
        f"{one['instances_per_work_cpu_s']:,.0f} per CPU second of work, the rate of one "
        f"worker with a core of its own.")
  for name, _, workers in systems:
    if workers > 1 and one and name in results:
      paired = [b["instances_per_s_after_startup"] / a["instances_per_s_after_startup"]
                for a, b in zip(results["1 worker"], results[name])]
      paired_e2e = [b["instances_per_s"] / a["instances_per_s"]
                    for a, b in zip(results["1 worker"], results[name])]
      # With a free core per worker, the work takes as long as its busiest worker's CPU
      # time: a speed-up that does not depend on the other load of the machine.
      paired_cpu = [a["work_cpu_s"] / b["critical_work_cpu_s"]
                    for a, b in zip(results["1 worker"], results[name])]
      ceiling = (f"; in the same rounds {max_workers} plain CPU-loop processes ran "
                 f"{statistics.median(probes):.2f}x as fast as one, the ceiling on this "
                 f"machine at that time" if probes else "")
      findings.append(
          f"{name} vs 1, paired within rounds (medians): wall clock "
          f"{statistics.median(paired):.2f}x after start-up and "
          f"{statistics.median(paired_e2e):.2f}x end to end (ideal {workers}x{ceiling}). "
          f"By CPU time {statistics.median(paired_cpu):.2f}x: one worker's work CPU s "
          f"over the busiest of the {workers} workers', the speed-up of the work with a "
          f"free core per worker. Work CPU s "
          f"{medians[name]['work_cpu_s'] / one['work_cpu_s']:.2f}x and CPU s with "
          f"start-up {medians[name]['cpu_s'] / one['cpu_s']:.2f}x one worker's for the "
          f"same instances (1.00x: no overhead; each worker imports TensorFlow).")
  if FLAGS.memory_check_repeat and one:
    small_med = medians[systems[-1][0]]
    findings.append(
        f"Peak memory: {one['peak_rss_mb']:.0f} MB on the {size_mb:.1f} MB corpus vs "
        f"{small_med['peak_rss_mb']:.0f} MB on {small_mb:.1f} MB: bounded by the chunk "
        f"({FLAGS.chunk_size_mb} MiB) and the TensorFlow runtime, not the corpus.")
  for line in findings:
    print(line)
  stats = _statistics(results[systems[0][0]][0]["summary"])
  print("statistics:", json.dumps(stats))
  all_runs = [res for rs in results.values() for res in rs]
  payload = {
      "command": common.command_line(),
      "machine": common.machine_description(),
      "input_file": FLAGS.input_file,
      "repeat": FLAGS.repeat,
      "max_seq_length": FLAGS.max_seq_length,
      "dupe_factor": FLAGS.dupe_factor,
      "chunk_size_mb": FLAGS.chunk_size_mb,
      "load_min": min(r["load_average"] for r in all_runs),
      "load_max": max(r["load_average"] for r in all_runs),
      "medians": medians,
      "findings": findings,
      "statistics": stats,
      "parallel_probe_speedups": probes,
      "runs": [{k: v for k, v in r.items() if k != "summary"} for r in all_runs],
  }
  print(f"results: {common.write_results(_SECTION, payload)}")
  if FLAGS.write_readme:
    common.update_readme_section(_SECTION, _markdown(payload))
  print(f"command: {payload['command']}")


if __name__ == "__main__":
  app.run(main)
