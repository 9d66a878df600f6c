r"""Benchmarks the pretraining input: the TensorFlow-free host input (grain,
bert_tf.data.pipelines.host_pipeline) against the tf.data pipeline, sequences per second.

Makes pretraining TFRecords (seq 128, 20 predictions) with the project's
create_pretraining_data from the first --corpus_mb of --input_file, then runs --rounds
rounds; each round times every system in a fresh process (the order rotates round by
round): the training input (the records shuffled in windows of 10,000, as the default
shuffle_buffer_size does on both engines, repeated, in batches of --batch_size) read for --batches batches after one warm-up batch. Per system it records
the wall-clock rate, the rate per CPU second of the process (all its threads: the rate
per core) and the start-up (until the first batch: imports, file indexing). The host
input's process runs with TensorFlow unimportable. It prints and records the medians and
regenerates its section of bench/README.md. --baseline=DIR adds the host input of
another checkout (its own worker, with its own default training shuffle) to every round,
on the same records, and the ratio of the host input's rate per CPU second to it, with
its 95% bootstrap interval over the rounds (an A/B of a change; a check, with
--nowrite_readme).

  python -m bench.input_pipeline --data_dir=$BERT_TF_DATA --rounds=5
  python -m bench.input_pipeline --data_dir=$BERT_TF_DATA --rounds=5 --baseline=BEFORE \
      --nowrite_readme
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from bench import common
from bench import stats

FLAGS = flags.FLAGS
common.define_data_dir_flag()
common.define_corpus_flags()
flags.DEFINE_float("corpus_mb", 1.0, "The first MB of --input_file made into records.")
flags.DEFINE_integer("dupe_factor", 2, "create_pretraining_data's --dupe_factor.")
flags.DEFINE_integer("num_shards", 4, "TFRecord files written.")
flags.DEFINE_integer("batch_size", 256, "Sequences per batch.")
flags.DEFINE_integer("batches", 40, "Batches timed per run, after one warm-up batch.")
flags.DEFINE_integer("rounds", 5, "Rounds; every system runs once per round.")
flags.DEFINE_float("target_per_core", 2000, "Sequences/s per core the host input is to "
                   "reach.")
flags.DEFINE_bool("write_readme", True, "Regenerate this benchmark's README section.")
flags.DEFINE_string("baseline", None, "Another checkout whose host input (host, "
                    "host_threads) runs in every round too.")
flags.DEFINE_string("worker", None, "Internal: run one system (host, host_threads, tf_data) "
                    "on --records and print its figures.")
flags.DEFINE_string("records", None, "Internal: the worker's comma-separated TFRecords.")

_SECTION = "input_pipeline"
SEQ_LENGTH, PREDICTIONS = 128, 20
# system -> what the table calls it.
SYSTEMS = {
    "host": "host input, no TensorFlow (grain, loads on next())",
    "host_threads": "host input, no TensorFlow (grain, 2 reader threads)",
    "tf_data": "tf.data (build_pretraining_dataset: the same order, records read by number)",
}
BASELINE = "baseline_"


def _systems() -> dict:
  """SYSTEMS, and with --baseline the baseline checkout's host inputs."""
  if not FLAGS.baseline:
    return dict(SYSTEMS)
  return {**SYSTEMS, **{f"{BASELINE}{system}": f"{SYSTEMS[system]}, at --baseline"
                        for system in ("host", "host_threads")}}


def _batches(system: str, records: str):
  """The training batches of `system` over `records`, an iterator."""
  if system.startswith("host"):
    from bert_tf.data.pipelines import host_pipeline  # pylint: disable=g-import-not-at-top
    from bert_tf.data.records import record_specs  # pylint: disable=g-import-not-at-top
    return host_pipeline.record_batches(
        records.split(","), record_specs.pretraining_spec(SEQ_LENGTH, PREDICTIONS),
        FLAGS.batch_size, shuffle_window=10000, repeat=True, seed=0,
        num_threads=2 if system == "host_threads" else 0)
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  from bert_tf.data.pipelines import pretraining_reader  # pylint: disable=g-import-not-at-top
  config = configs.DataConfig(input_path=records, global_batch_size=FLAGS.batch_size,
                              seq_length=SEQ_LENGTH, max_predictions_per_seq=PREDICTIONS)
  return iter(pretraining_reader.build_pretraining_dataset(config))


def run_worker(system: str, records: str) -> dict:
  """One system's figures in this process (see the module docstring)."""
  start_wall, start_cpu = time.perf_counter(), time.process_time()
  iterator = _batches(system, records)
  next(iterator)
  startup = time.perf_counter() - start_wall
  wall, cpu = time.perf_counter(), time.process_time()
  rows = 0
  for _ in range(FLAGS.batches):
    batch = next(iterator)
    rows += len(batch["next_sentence_labels"])
  wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
  return {"sequences": rows, "wall_s": wall, "cpu_s": cpu, "startup_s": startup,
          "startup_cpu_s": time.process_time() - start_cpu - cpu,
          "tensorflow_loaded": sys.modules.get("tensorflow") is not None}


def _make_records(directory: str) -> str:
  from bert_tf.data.creation import create_pretraining_data as cpd  # pylint: disable=g-import-not-at-top
  from bert_tf.data.records import pretraining_format  # pylint: disable=g-import-not-at-top
  corpus = os.path.join(directory, "corpus.txt")
  with open(FLAGS.input_file, "rb") as f:
    data = f.read(int(FLAGS.corpus_mb * (1 << 20)))
  with open(corpus, "wb") as f:
    f.write(data[:data.rfind(b"\n\n") + 1])
  settings = pretraining_format.PretrainingDataSettings(
      max_seq_length=SEQ_LENGTH, max_predictions_per_seq=PREDICTIONS,
      dupe_factor=FLAGS.dupe_factor)
  output = os.path.join(directory, "pretrain")
  summary = cpd.create_pretraining_data(corpus, FLAGS.vocab_file, output, settings,
                                        num_shards=FLAGS.num_shards, progress=False)
  paths = pretraining_format.output_paths(output, FLAGS.num_shards, gzip=False)
  return ",".join(paths), summary["instances"]


def _run(system: str, records: str) -> dict:
  checkout = common.REPO_ROOT
  if system.startswith(BASELINE):
    checkout, system = os.path.abspath(FLAGS.baseline), system[len(BASELINE):]
  # Run as a file with its checkout first on the path: serves checkouts where bench/ is
  # a package and older ones whose benchmarks put their own folder on the path.
  cmd = [sys.executable, os.path.join(checkout, "bench", "input_pipeline.py"),
         f"--worker={system}", f"--records={records}", f"--batch_size={FLAGS.batch_size}",
         f"--batches={FLAGS.batches}"]
  env = dict(os.environ, PYTHONPATH=checkout, TF_CPP_MIN_LOG_LEVEL="2")
  out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
  if out.returncode:
    raise RuntimeError(f"{system} failed:\n{out.stderr[-3000:]}")
  return json.loads(out.stdout.strip().splitlines()[-1])


def _medians(runs):
  rates = [r["sequences"] / r["wall_s"] for r in runs]
  per_core = [r["sequences"] / r["cpu_s"] for r in runs]
  return {"runs": len(runs), "sequences_per_s": statistics.median(rates),
          "sequences_per_cpu_s": statistics.median(per_core),
          "cpu_per_wall": statistics.median(r["cpu_s"] / r["wall_s"] for r in runs),
          "startup_s": statistics.median(r["startup_s"] for r in runs),
          "tensorflow_loaded": any(r["tensorflow_loaded"] for r in runs)}


def _cpu_per_sequence(runs):
  """Each round's CPU seconds per sequence, as stats' per-round lists of seconds."""
  return [[r["cpu_s"] / r["sequences"]] for r in runs]


def _report(payload) -> str:
  header = ["input", "runs", "sequences/s (wall)", "sequences per CPU s (per core)",
            "CPU s per wall s", "start-up s", "TensorFlow loaded"]
  rows = []
  for system, name in _systems().items():
    m = payload["systems"][system]
    rows.append([name, m["runs"], f"{m['sequences_per_s']:,.0f}",
                 f"{m['sequences_per_cpu_s']:,.0f}", f"{m['cpu_per_wall']:.2f}",
                 f"{m['startup_s']:.1f}", "yes" if m["tensorflow_loaded"] else "no"])
  host = payload["systems"]["host"]["sequences_per_cpu_s"]
  tf_data = payload["systems"]["tf_data"]["sequences_per_cpu_s"]
  against_baseline = [
      f"- {system} over the baseline's, by sequences per CPU s: "
      f"{stats.format_interval(ratio['ratio'], ratio['interval'])}."
      for system, ratio in payload.get("over_baseline", {}).items()]
  return "\n".join([
      f"`{payload['command']}`", "",
      f"{payload['machine']}; load average {payload['load_before']} before the runs, "
      f"{payload['load_after']} after. Records: {payload['instances']:,} sequences (seq "
      f"{SEQ_LENGTH}, {PREDICTIONS} predictions) in {FLAGS.num_shards} files made by "
      f"create_pretraining_data from the first {FLAGS.corpus_mb} MB of "
      f"`{os.path.basename(FLAGS.input_file)}` (uncased vocab, dupe_factor "
      f"{FLAGS.dupe_factor}). The training input (shuffled, repeated) in batches of "
      f"{FLAGS.batch_size}, {FLAGS.batches} batches timed after one, each system in a "
      f"fresh process per round, the order rotating; medians of the rounds. Per CPU s "
      f"counts every thread of the process: the rate of one core.", "",
      common.markdown_table(header, rows), "",
      f"- The host input: {host:,.0f} sequences per core-second "
      f"({host / FLAGS.target_per_core:.1f}x the {FLAGS.target_per_core:,.0f} target); "
      f"tf.data, which parses in C++ threads, {tf_data:,.0f} ({tf_data / host:.1f}x the "
      f"host input's). Both read the records in one order, computed per batch with NumPy "
      f"(bert_tf.data.records.record_order).",
      "- Wall-clock rates move with the machine's load (the CPU s per wall s column: the "
      "share of a core the process got); the per-core rates move less.",
      *against_baseline])


def main(argv):
  del argv
  if FLAGS.worker:
    if FLAGS.worker.startswith("host"):
      sys.modules["tensorflow"] = None  # The host input runs without TensorFlow.
    print(json.dumps(run_worker(FLAGS.worker, FLAGS.records)))
    return
  common.resolve_corpus_flags()
  if FLAGS.write_readme:
    common.require_readme_section(_SECTION)
  load_before = common.load_average()
  with tempfile.TemporaryDirectory() as directory:
    records, instances = _make_records(directory)
    runs = {system: [] for system in _systems()}
    order = list(runs)
    for round_index in range(FLAGS.rounds):
      shift = round_index % len(order)
      for system in order[shift:] + order[:shift]:
        runs[system].append(_run(system, records))
        print(f"round {round_index + 1} {system}: "
              f"{runs[system][-1]['sequences'] / runs[system][-1]['cpu_s']:,.0f} "
              "sequences per CPU s", flush=True)
  payload = {"command": common.command_line(), "machine": common.machine_description(),
             "load_before": load_before, "load_after": common.load_average(),
             "instances": instances, "runs": runs,
             "systems": {system: _medians(r) for system, r in runs.items()}}
  if FLAGS.baseline:
    payload["baseline"] = os.path.abspath(FLAGS.baseline)
    payload["over_baseline"] = {
        system: stats.ratio_with_interval(_cpu_per_sequence(runs[system]),
                                          _cpu_per_sequence(runs[BASELINE + system]))
        for system in ("host", "host_threads")}
  common.write_results(_SECTION, payload)
  report = _report(payload)
  print(report)
  if FLAGS.write_readme:
    common.update_readme_section(_SECTION, report)


if __name__ == "__main__":
  app.run(main)
