"""The driver side of the interleaved benchmarks: worker processes, rounds, their flags.

A benchmark starts one long-lived worker process per system (ours and each peer, every
peer in its own virtual environment, see peer_envs), waits until all have warmed up, then
asks each in turn for a few timed steps, round after round (the workers speak
bench/peers/protocol.py). Ours and the peers thus share the same moments of a noisy
machine, and the ratio ours/peer is taken between medians of the same run (stats).
"""

import contextlib
import os
import statistics
import subprocess
import time
from typing import Dict, List, Optional, Sequence, Union

from absl import flags

from bench import common
from bench import machine_load
from bench import stats
from bench.peers import protocol

# Rounds of a figure of record: the bootstrap over rounds needs a few to tell a 15%
# difference from the noise of a shared machine.
MIN_ROUNDS = 5


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


class Worker:
  """One benchmark worker process speaking bench/peers/protocol.py."""

  def __init__(self, name: str, argv: List[str],
               env: Optional[Dict[str, Optional[str]]] = None):
    self.name = name
    self.argv = argv
    full_env = dict(os.environ)
    full_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # Workers run as modules of the bench package (python -m bench....), in our
    # environment or a peer's: the repository root is where both find it.
    full_env["PYTHONPATH"] = os.pathsep.join(
        [common.REPO_ROOT] +
        ([full_env["PYTHONPATH"]] if full_env.get("PYTHONPATH") else []))
    for key, value in (env or {}).items():
      if value is None:
        full_env.pop(key, None)  # None: the variable unset in the worker.
      else:
        full_env[key] = value
    self.log_path = os.path.join(common.run_dir(), f"{name}.log")
    self._log = open(self.log_path, "w")
    self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=self._log, text=True, env=full_env, cwd=common.REPO_ROOT)
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
      payload = protocol.tagged_payload(line, tag)
      if payload is not None:
        return payload

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


def alternate(workers: Sequence[Worker], rounds: int,
              steps_per_round: Union[int, Sequence[int]],
              quiet_load: float = 0.5, quiet_timeout: float = 0.0,
              compete: bool = False, compete_alternate: bool = False) -> List[dict]:
  """Runs `rounds` rounds, each giving every (ready) worker `steps_per_round` steps
  (one count for all, or a count per worker), then closes the workers.

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
  counts = ([steps_per_round] * len(workers) if isinstance(steps_per_round, int)
            else list(steps_per_round))
  plan = stats.round_plan(range(len(workers)), rounds, compete, compete_alternate)
  total = len(plan)
  for r, (indices, loaded) in enumerate(plan):
    gate = machine_load.wait_for_quiet(quiet_load, quiet_timeout)
    others = machine_load.busy_cpus(1.0)
    order = [workers[i] for i in indices]
    with machine_load.Competitor() if loaded else contextlib.nullcontext():
      line = [f"{workers[i].name} {statistics.median(workers[i].run(counts[i])) * 1000:.0f} ms"
              for i in indices]
    records.append({"round": r + 1, "order": [w.name for w in order], **gate,
                    "others_busy_cpus": others, "compete": loaded})
    others_text = "n/a" if others is None else f"{others:.2f}"
    print(f"  round {r + 1}/{total} (load {gate['load']:.2f}, waited "
          f"{gate['waited_s']:.0f}s, others busy {others_text} CPUs"
          f"{', competing job' if loaded else ''}): " + ", ".join(line), flush=True)
  for worker in workers:
    worker.close()
  return records
