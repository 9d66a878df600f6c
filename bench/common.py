"""Shared pieces of the benchmarks: interleaved worker processes, peer virtual
environments, statistics, and the generated tables of bench/README.md.

A benchmark starts one long-lived worker process per system (ours and each peer, every
peer in its own virtual environment), waits until all have warmed up, then asks each in
turn for a few timed steps, round after round. Ours and the peers thus share the same
moments of a noisy machine, and the ratio ours/peer is taken between medians of the same
run.
"""

import contextlib
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence

from absl import app
from absl import flags

from bert_tf import cpu_kernels
from bert_tf.utils import files

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import machine_load  # pylint: disable=g-import-not-at-top,wrong-import-position
import stats  # pylint: disable=g-import-not-at-top,wrong-import-position

# Before any TensorFlow import: our side runs with the CPU kernels the tools choose
# (TF_ENABLE_ONEDNN_OPTS=1 on x86-64). Peer workers get theirs from peer_env.
cpu_kernels.prefer_onednn()

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
README = os.path.join(BENCH_DIR, "README.md")
RESULTS_DIR = os.path.join(BENCH_DIR, "results")
# Workers' stderr (TF logs, tracebacks) goes here, outside the source tree.
LOG_DIR = os.environ.get("BERT_TF_BENCH_LOGS", "/tmp/bert_tf_bench_logs")
DEFAULT_VENV_ROOT = os.environ.get("BERT_TF_PEER_VENVS", "/tmp/peer_venvs")
# The folder of the public data sets (glue_<task>/, conll2003/, squad_v1.1/,
# wikitext2_raw/, bert_vocab/): --data_dir, or this variable when the flag is not given.
DATA_DIR_VARIABLE = "BERT_TF_DATA"

# Each peer's virtual environment: packages installed in this order (torch first, with
# the exact CPU version, so that nothing later pulls a CUDA build).
PEER_PACKAGES = {
    "model_garden": [["tf-models-official==2.20.0", "tf_keras"]],
    "keras_hub": [["keras-hub", "tensorflow==2.21.0"]],
    "hf": [["torch==2.13.0"], ["transformers"]],
}
PEER_LABELS = {
    "ours": "bert_tf",
    "baseline": "bert_tf, --baseline checkout",
    "model_garden": "Model Garden",
    "keras_hub": "KerasHub",
    "hf": "HF transformers",
}


def command_line() -> str:
  """The command that started this process, to print beside its figures."""
  return "python " + " ".join(shlex.quote(a) for a in
                              [os.path.relpath(sys.argv[0], REPO_ROOT)] + sys.argv[1:])


def define_data_dir_flag() -> flags.FlagHolder:
  """Defines --data_dir, defaulting to $BERT_TF_DATA (see data_path)."""
  return flags.DEFINE_string(
      "data_dir", os.environ.get(DATA_DIR_VARIABLE),
      f"Folder of the public data sets (glue_<task>/, conll2003/, squad_v1.1/, "
      f"wikitext2_raw/, bert_vocab/); default ${DATA_DIR_VARIABLE}.")


def require_flags(*names: str) -> None:
  """Raises app.UsageError naming the first of the flags `names` left empty."""
  for name in names:
    if not flags.FLAGS[name].value:
      raise app.UsageError(f"--{name} is required")


def data_path(*parts: str) -> str:
  """A path under --data_dir; exits with a usage message when no folder was given."""
  data_dir = flags.FLAGS.data_dir
  if not data_dir:
    raise SystemExit(f"No data folder: pass --data_dir=DIR or set ${DATA_DIR_VARIABLE}.")
  return os.path.join(data_dir, *parts)


def peer_env(onednn: bool = True) -> Dict[str, Optional[str]]:
  """Environment entries for a peer worker: oneDNN on, as for ours (the TensorFlow
  peers' best CPU setting on CPUs where TensorFlow leaves it off), or with
  onednn=False TensorFlow's own default (the variable unset, as a peer's user gets it)."""
  return {cpu_kernels.ONEDNN_VARIABLE: "1" if onednn else None}


def define_protocol_flags(compete_alternate: bool = False) -> None:
  """The flags of the round protocol (see alternate), shared by the interleaved
  benchmarks; --compete_alternate only for a benchmark that reports it."""
  flags.DEFINE_float("quiet_load", 0.5, "Before each round, wait until the 1-minute load "
                     "average is at most this (or --quiet_timeout passed); each round "
                     "records the load it started at.")
  flags.DEFINE_float("quiet_timeout", 180, "Longest wait for --quiet_load, seconds "
                     "(0: no wait; the load is still recorded).")
  flags.DEFINE_bool("compete", False, "Run one competing one-core busy process (a "
                    "pinned Python loop, the same for every system) during each round's "
                    "timed steps: how each system degrades when a core is taken.")
  if not compete_alternate:
    return
  flags.DEFINE_bool("compete_alternate", False, "Rounds in pairs with the same order, "
                    "the first quiet, the second with the competing job of --compete: "
                    "each system's slowdown under load (loaded over quiet median step, "
                    "with its bootstrap interval over the pairs) from one run.")


def check_rounds_of_record(rounds: int, recording: bool) -> None:
  """Figures of record need at least MIN_ROUNDS rounds (a check may use fewer)."""
  if recording and rounds < MIN_ROUNDS:
    raise SystemExit(f"--rounds={rounds}: figures of record need at least {MIN_ROUNDS} "
                     f"rounds (or --nowrite_readme for a check)")


# Rounds of a figure of record: the bootstrap over rounds needs a few to tell a 15%
# difference from the noise of a shared machine.
MIN_ROUNDS = 5


def peer_python(peer: str, venv_root: str = DEFAULT_VENV_ROOT) -> str:
  return os.path.join(venv_root, peer, "bin", "python")


def install_peers(peers: Sequence[str], venv_root: str = DEFAULT_VENV_ROOT) -> None:
  """Creates (or completes) one virtual environment per peer under venv_root."""
  for peer in peers:
    if peer not in PEER_PACKAGES:
      raise ValueError(f"Unknown peer '{peer}'; peers: {', '.join(PEER_PACKAGES)}")
    venv = os.path.join(venv_root, peer)
    if not os.path.exists(peer_python(peer, venv_root)):
      print(f"[install] creating {venv}", flush=True)
      subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    for group in PEER_PACKAGES[peer]:
      print(f"[install] {peer}: pip install {' '.join(group)}", flush=True)
      subprocess.run([peer_python(peer, venv_root), "-m", "pip", "install", "-q", *group],
                     check=True)


def check_peers(peers: Sequence[str], venv_root: str) -> None:
  missing = [p for p in peers if p != "ours" and not os.path.exists(peer_python(p, venv_root))]
  if missing:
    raise SystemExit(f"No virtual environment for {', '.join(missing)} under {venv_root}; "
                     f"run again with --install_peers (or --venv_root=DIR).")


def ready_peers(peer_flag: Sequence[str], install: bool, venv_root: str) -> List[str]:
  """The peers named by a --peers flag, their venvs created first when `install`."""
  peers = [p for p in peer_flag if p]
  if install:
    install_peers(peers, venv_root)
  check_peers(peers, venv_root)
  return peers


class Worker:
  """One benchmark worker process speaking bench/peers/protocol.py."""

  def __init__(self, name: str, argv: List[str],
               env: Optional[Dict[str, Optional[str]]] = None):
    self.name = name
    self.argv = argv
    full_env = dict(os.environ)
    full_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    full_env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(BENCH_DIR, "peers")] +
        ([full_env["PYTHONPATH"]] if full_env.get("PYTHONPATH") else []))
    for key, value in (env or {}).items():
      if value is None:
        full_env.pop(key, None)  # None: the variable unset in the worker.
      else:
        full_env[key] = value
    self.log_path = os.path.join(LOG_DIR, f"{name}.log")
    os.makedirs(LOG_DIR, exist_ok=True)
    self._log = open(self.log_path, "w")
    self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=self._log, text=True, env=full_env, cwd=REPO_ROOT)
    self.info = None
    self.step_seconds: List[float] = []
    # Per round: the step seconds of that round (the unit the bootstrap resamples).
    self.rounds: List[List[float]] = []
    self.cpu_rounds: List[List[float]] = []
    self.cpu_seconds: List[float] = []
    self.peak_rss_mb = None

  def _read(self, tag: str) -> dict:
    while True:
      line = self.proc.stdout.readline()
      if not line:
        raise RuntimeError(f"worker {self.name} exited (code {self.proc.poll()}); "
                           f"see {self.log_path}")
      if line.startswith(tag + " "):
        return json.loads(line[len(tag) + 1:])

  def wait_ready(self) -> dict:
    self.info = self._read("READY")
    return self.info

  def run(self, steps: int) -> List[float]:
    self.proc.stdin.write(f"run {steps}\n")
    self.proc.stdin.flush()
    result = self._read("RESULT")
    seconds = result["step_seconds"]
    self.step_seconds += seconds
    self.rounds.append(seconds)
    self.cpu_seconds += result.get("cpu_seconds", [])
    self.cpu_rounds.append(result.get("cpu_seconds", []))
    return seconds

  def close(self) -> None:
    if self.proc.poll() is None:
      try:
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.peak_rss_mb = self._read("DONE")["peak_rss_mb"]
      except (RuntimeError, BrokenPipeError):
        pass
      self.proc.wait(timeout=120)
    self._log.close()


def start_sequential(specs: Sequence[tuple]) -> List[Worker]:
  """Starts workers one at a time, each after the previous one is ready."""
  workers = []
  for name, argv, env in specs:
    worker = Worker(name, argv, env)
    t0 = time.time()
    info = worker.wait_ready()
    print(f"  [{name}] ready after {time.time() - t0:.0f}s "
          f"({', '.join(f'{k}={v}' for k, v in info.items() if k != 'warmup_seconds')})",
          flush=True)
    workers.append(worker)
  return workers


def alternate(workers: Sequence[Worker], rounds: int, steps_per_round: int,
              quiet_load: float = 0.5, quiet_timeout: float = 0.0,
              compete: bool = False, compete_alternate: bool = False) -> List[dict]:
  """Runs `rounds` rounds, each giving every (ready) worker `steps_per_round` steps,
  then closes the workers.

  Before each round it waits for a quiet machine (machine_load.wait_for_quiet, up to
  quiet_timeout seconds) and samples what other processes use; the round's order
  rotates (stats.round_order), so each system starts first in turn; with `compete`, one
  pinned one-core busy process runs during the round's timed steps. With
  `compete_alternate` the rounds go in pairs of the same order, the second of each pair
  with the competing job (2 x `rounds` rounds in all).

  Returns:
    One record per round: its order, the load average when the round started
    ("load"), the wait ("waited_s", "quiet"), the CPUs other processes kept busy just
    before it ("others_busy_cpus") and "compete".
  """
  records = []
  plan = stats.round_plan(range(len(workers)), rounds, compete, compete_alternate)
  total = len(plan)
  for r, (indices, loaded) in enumerate(plan):
    gate = machine_load.wait_for_quiet(quiet_load, quiet_timeout)
    others = machine_load.busy_cpus(1.0)
    order = [workers[i] for i in indices]
    with machine_load.Competitor() if loaded else contextlib.nullcontext():
      line = [f"{w.name} {statistics.median(w.run(steps_per_round)) * 1000:.0f} ms"
              for w in order]
    records.append({"round": r + 1, "order": [w.name for w in order], **gate,
                    "others_busy_cpus": others, "compete": loaded})
    others_text = "n/a" if others is None else f"{others:.2f}"
    print(f"  round {r + 1}/{total} (load {gate['load']:.2f}, waited "
          f"{gate['waited_s']:.0f}s, others busy {others_text} CPUs"
          f"{', competing job' if loaded else ''}): " + ", ".join(line), flush=True)
  for worker in workers:
    worker.close()
  return records


def load_summary(records: Sequence[dict]) -> str:
  """'load 0.31-0.52 (5/5 rounds quiet), others busy 0.02-0.10 CPUs' of round records."""
  loads = [r["load"] for r in records]
  others = [r["others_busy_cpus"] for r in records if r.get("others_busy_cpus") is not None]
  quiet = sum(1 for r in records if r.get("quiet"))
  text = f"1-min load {min(loads):.2f}-{max(loads):.2f} at round starts " \
         f"({quiet}/{len(records)} under the gate)" if loads else "no rounds"
  if others:
    text += f", others busy {min(others):.2f}-{max(others):.2f} CPUs"
  loaded = sum(1 for r in records if r.get("compete"))
  if loaded == len(records) and records:
    text += ", with a competing one-core job"
  elif loaded:
    text += f", a competing one-core job in {loaded}/{len(records)} rounds"
  return text


def step_summary(rounds: Sequence[Sequence[float]]) -> dict:
  """The per-step figures of one system: median, quartiles, min/max (seconds) and the
  per-round lists they come from."""
  spread = stats.median_spread([s for r in rounds for s in r])
  return {"median_step_seconds": spread["median"], "step_seconds_q1": spread["q1"],
          "step_seconds_q3": spread["q3"], "step_seconds_min": spread["min"],
          "step_seconds_max": spread["max"], "round_step_seconds": [list(r) for r in rounds]}


def ratio_with_interval(ours_rounds, peer_rounds) -> dict:
  """{"ratio", "interval"}: ours' speed over the peer's (the peer's median step over
  ours) with its 95% bootstrap interval over the shared rounds."""
  return {"ratio": stats.speed_ratio(ours_rounds, peer_rounds),
          "interval": list(stats.bootstrap_ratio_interval(ours_rounds, peer_rounds))}


def interleaved_times(calls: Dict[str, Callable[[], object]], rounds: int,
                      report_rounds: bool = False) -> Dict[str, List[float]]:
  """Times functions of one process in turns: each round calls every one once, in an
  order that rotates every round (stats.round_order). Returns {name: seconds of each round}; with
  report_rounds, prints each round's times."""
  times = {name: [] for name in calls}
  for r in range(rounds):
    for name in stats.round_order(list(calls), r):
      start = time.perf_counter()
      calls[name]()
      times[name].append(time.perf_counter() - start)
    if report_rounds:
      print(f"  round {r + 1}/{rounds}: " + ", ".join(
          f"{name} {1000 * times[name][-1]:.0f} ms" for name in calls), flush=True)
  return times


def directory_bytes(path: str) -> int:
  """Total size of the files under `path` (a SavedModel's size on disk)."""
  return sum(os.path.getsize(os.path.join(root, name))
             for root, _, names in os.walk(path) for name in names)


def classifier_dev_accuracy(signatures: Dict[str, Callable], experiment, glue_task: str,
                            batch_size: int = 32, max_examples: int = 0) -> Dict[str, float]:
  """Dev accuracy (percent) of classifier exports on <data_dir>/glue_<task>/dev.tsv.

  Args:
    signatures: {name: an export's serve_token_ids signature}; all share the vocab and
      the packing of `experiment`.
    experiment: the sentence_prediction experiment whose eval_data reader packs dev.tsv.
    glue_task: e.g. "sst2".
    batch_size: examples per call.
    max_examples: stop after at least this many examples (0: the whole dev set).

  Returns:
    {name: accuracy in percent}, and "dev_examples": the number scored.
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import base  # pylint: disable=g-import-not-at-top
  dev = experiment.override({"eval_data": {
      "input_path": data_path(f"glue_{glue_task}", "dev.tsv"), "format": "tsv",
      "global_batch_size": batch_size, "is_training": False, "drop_remainder": False}})
  task = base.get_task(dev)
  correct, count = {name: 0 for name in signatures}, 0
  for batch in task.build_inputs(dev.eval_data):
    inputs = {k: batch[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    labels = batch["label_ids"].numpy()
    for name, signature in signatures.items():
      predicted = np.argmax(signature(**inputs)["probabilities"].numpy(), axis=-1)
      correct[name] += int(np.sum(predicted == labels))
    count += len(labels)
    if max_examples and count >= max_examples:
      break
  return {**{name: 100.0 * correct[name] / count for name in signatures},
          "dev_examples": count}


def token_ids_latency_ms(signatures: Dict[str, Callable], vocab_size: int, seq_length: int,
                         rounds: Dict[int, int]) -> Dict[str, Dict[int, float]]:
  """Median milliseconds per call of serve_token_ids signatures, interleaved.

  Args:
    signatures: {name: serve_token_ids signature}.
    vocab_size: random ids are drawn from [5, vocab_size).
    seq_length: T of every row (no padding).
    rounds: {batch size: timed rounds}; two untimed rounds warm each batch size up.

  Returns:
    {name: {batch size: median ms}}.
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  largest = max(rounds)
  ids = {"input_word_ids": rng.integers(5, vocab_size, (largest, seq_length)),
         "input_mask": np.ones((largest, seq_length)),
         "input_type_ids": np.zeros((largest, seq_length))}
  ids = {k: tf.constant(v, tf.int32) for k, v in ids.items()}
  result = {name: {} for name in signatures}
  for batch, count in rounds.items():
    sliced = {k: v[:batch] for k, v in ids.items()}
    calls = {name: (lambda s=signature: s(**sliced)["probabilities"].numpy())
             for name, signature in signatures.items()}
    interleaved_times(calls, 2)
    times = interleaved_times(calls, count)
    for name in signatures:
      result[name][batch] = 1000 * median(times[name])
  return result


def load_average() -> str:
  """The 1/5/15-minute load averages, as `uptime` shows them."""
  return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def median(values: Sequence[float]) -> float:
  return statistics.median(values) if values else float("nan")


def results_path(name: str) -> str:
  return os.path.join(RESULTS_DIR, f"{name}.json")


def read_results(name: str) -> dict:
  """bench/results/<name>.json, or {} when the benchmark has not written it yet."""
  if not os.path.exists(results_path(name)):
    return {}
  with open(results_path(name)) as f:
    return json.load(f)


def write_results(name: str, payload: dict) -> str:
  """Writes bench/results/<name>.json (through a temporary file) and returns its path."""
  path = results_path(name)
  with files.atomic_open(path) as f:
    json.dump(payload, f, indent=1, sort_keys=True)
  return path


def matmul_peak_gflops() -> Optional[float]:
  """The float32 matmul peak bench/matmul_peak.py last recorded (None before it ran): the
  denominator of every MFU column."""
  return read_results("matmul_peak").get("peak_gflops")


def merge_results(name: str, key: str, entries: Dict[str, dict]) -> str:
  """Replaces the entries of payload[key] named in `entries` in bench/results/<name>.json,
  keeping the others: a benchmark run on a few configurations or tasks at a time keeps
  one file whose every entry carries its own command and machine."""
  payload = read_results(name)
  payload.setdefault(key, {}).update(entries)
  return write_results(name, payload)


def _section_pattern(section: str):
  begin, end = f"<!-- BEGIN {section} -->", f"<!-- END {section} -->"
  return begin, end, re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)


def require_readme_section(section: str, readme: str = README) -> None:
  """Raises before a long run if the README lacks the markers its table goes between."""
  with open(readme) as f:
    text = f.read()
  begin, end, pattern = _section_pattern(section)
  if not pattern.search(text):
    raise ValueError(f"{readme} has no section markers for '{section}': add the lines "
                     f"'{begin}' and '{end}' where its table belongs, or run with the "
                     f"flag that leaves the README alone")


def update_readme_section(section: str, markdown: str, readme: str = README) -> None:
  """Replaces the text between `<!-- BEGIN section -->` and `<!-- END section -->`."""
  require_readme_section(section, readme)
  with open(readme) as f:
    text = f.read()
  begin, end, pattern = _section_pattern(section)
  text = pattern.sub(lambda _: f"{begin}\n{markdown.rstrip()}\n{end}", text)
  with files.atomic_open(readme) as f:
    f.write(text)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for row in rows:
    lines.append("| " + " | ".join(str(c) for c in row) + " |")
  return "\n".join(lines)


def machine_description() -> str:
  """CPU model, core count and the frameworks' versions, for the results header."""
  model, flags_ = "unknown CPU", set()
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name") and model == "unknown CPU":
          model = line.split(":", 1)[1].strip()
        elif line.startswith("flags"):
          flags_ = set(line.split(":", 1)[1].split())
          break
  except OSError:
    pass
  # Whether TensorFlow turns oneDNN on by itself depends on these (bert_tf.cpu_kernels).
  isa = ("AVX-512" + (" BF16" if "avx512_bf16" in flags_ else "") if "avx512f" in flags_
         else "AVX2, no AVX-512" if "avx2" in flags_ else "no AVX2")
  return f"{model}, {os.cpu_count()} cores, {isa}"
