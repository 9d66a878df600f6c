"""What a change does to the pretraining step's graph: the op census of the traced
training loop (bench/step_graph_worker.py) of this checkout and of another one, and the
op types whose counts differ, with the in-memory batch bench/pretraining_step.py times
and with the same batch read from TFRecords as training reads it.

bench/pretraining_step.py --baseline times a change against the checkout before it; on a
shared machine a few percent either way is within its noise. The census is not: the
same counts (the ops of the step, those inside its XLA-compiled pieces under "xla:")
say that both checkouts run the same kernels, and any difference names the ops that came
or went. Each checkout's census runs in a fresh process of its own, on the trainer of
its own pretraining worker (the step bench/pretraining_step.py times).

  python -m bench.step_graph --configs=mini,base --baseline=/tmp/before
"""

import json
import os
import subprocess
import sys
import tempfile

from absl import app
from absl import flags

from bench import common
from bench import pretraining_step

# --configs and --baseline are bench/pretraining_step.py's own flags (imported with it):
# the same command line names the same comparison; its other flags are not read here.
FLAGS = flags.FLAGS
# input: what the table calls it.
INPUTS = {"memory": "in-memory batch", "records": "TFRecords"}
flags.DEFINE_list("inputs", list(INPUTS), "The step's inputs to trace, among: "
                  + ", ".join(INPUTS) + ".")


def run_census(checkout: str, size: str, batch: int, seq: int, predictions: int,
               records_dir: str = "") -> dict:
  """{op type: nodes} of `checkout`'s traced training loop, from a fresh worker; its
  input read from TFRecords written to `records_dir` where one is given."""
  argv = [sys.executable, "-m", "bench.step_graph_worker", "--checkout", checkout,
          "--size", size, "--batch_size", str(batch), "--seq_length", str(seq),
          "--predictions", str(predictions), "--records_dir", records_dir]
  env = dict(os.environ, PYTHONPATH=common.REPO_ROOT, CUDA_VISIBLE_DEVICES="",
             TF_CPP_MIN_LOG_LEVEL="2")
  out = subprocess.run(argv, env=env, cwd=common.REPO_ROOT, capture_output=True, text=True,
                       check=False)
  if out.returncode:
    raise RuntimeError(f"The census of {checkout} failed:\n{out.stderr[-3000:]}")
  return json.loads(out.stdout.strip().splitlines()[-1])


def differences(ours: dict, baseline: dict) -> list:
  """[(op type, baseline's count, ours)] of the op types whose counts differ, the
  largest differences first."""
  rows = [(op, baseline.get(op, 0), ours.get(op, 0)) for op in set(ours) | set(baseline)
          if ours.get(op, 0) != baseline.get(op, 0)]
  return sorted(rows, key=lambda row: (-abs(row[2] - row[1]), row[0]))


def report(name: str, ours: dict, baseline: dict) -> str:
  """The census comparison of one configuration, as text."""
  total = lambda counts: sum(counts.values())
  head = (f"{name}: {total(ours)} ops (baseline {total(baseline)}), "
          f"{len(ours)} op types (baseline {len(baseline)})")
  rows = differences(ours, baseline)
  if not rows:
    return f"{head}; the same count of every op type"
  return "\n".join([f"{head}; {len(rows)} op types differ:", common.markdown_table(
      ["op type", "baseline", "ours", "ours - baseline"],
      [[op, b, o, f"{o - b:+d}"] for op, b, o in rows])])


def main(argv):
  del argv
  if not FLAGS.baseline:
    raise app.UsageError("--baseline is required")
  for name in FLAGS.configs:
    if name not in pretraining_step.CONFIGS:
      raise app.UsageError(f"Unknown config '{name}'; configs: "
                           f"{', '.join(pretraining_step.CONFIGS)}")
  for name in FLAGS.inputs:
    if name not in INPUTS:
      raise app.UsageError(f"Unknown input '{name}'; inputs: {', '.join(INPUTS)}")
  baseline = os.path.abspath(FLAGS.baseline)
  for name in FLAGS.configs:
    size, batch, seq, predictions, _ = pretraining_step.CONFIGS[name]
    for source in FLAGS.inputs:
      with tempfile.TemporaryDirectory() as directory:
        records = directory if source == "records" else ""
        ours = run_census(common.REPO_ROOT, size, batch, seq, predictions, records)
        theirs = run_census(baseline, size, batch, seq, predictions, records)
      print(report(f"{name}, {INPUTS[source]}", ours, theirs), flush=True)
  print(f"step_graph: command: {common.command_line()}")


if __name__ == "__main__":
  app.run(main)
