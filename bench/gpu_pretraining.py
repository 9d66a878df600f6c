"""Pretraining-step throughput on one accelerator: bert_tf's JAX training step against
Hugging Face BertForPreTraining in torch (eager and torch.compile), with no TensorFlow.

Ours is BertPretrainer over BertEncoder (the reference layers), the loss
bert_tf.losses.pretraining_loss and Keras AdamW with the project's schedule, weight decay
and global-norm clipping, compiled by bert_tf.training.jax_engine.step. Hugging Face's is
BertForPreTraining of the same size with SDPA attention, bf16 autocast, fused
torch.optim.AdamW and clipping (bench/gpu_pretraining_worker.py has both). Both train on
the same synthetic batch of the real shapes: seq 128 with 20 masked positions, seq 512
with 76.

Every configuration, and the matmul-rate measurement, runs in a process of its own with
a timeout, one after the other: jax and torch never hold the device's memory at once,
and a failed compile or a timeout costs one figure, not the run. Each finished
configuration is appended to --output (JSON lines) at once, so a run cut short keeps
what it measured. At the end the run prints a table and, under it, the command that
reproduces each figure.

Figures: per configuration the median step time with its quartiles and min/max over
the timed steps (each step synchronized; the first step, which compiles, is reported
apart as `first step s`, and --warmup_steps more are left out), sequences/s = batch /
median step, and MFU = model FLOPs/s / the dense bf16 matmul rate the same run measured
on the same device (the best median over --matmul_shapes, in jax and in torch, the
higher of the two). Model FLOPs per training sequence are bench/flops.py's: the
matmuls only, 3x the forward pass, the masked-LM head at the masked positions and the
pooler included. Both sides are credited with these FLOPs, whatever they
compute beyond them (Hugging Face's stock forward, --hf_mlm=all, runs the masked-LM
head at all T positions) or save (ours computes the last block only at [CLS] and the
masked positions).

  python bench/gpu_pretraining.py                                     # on a GPU machine
  python bench/gpu_pretraining.py --sizes=tiny --seqs=128 --batch_sizes=128:4 \\
      --sides=ours,hf_eager --precision=float32 --device=cpu --steps=3   # on a CPU
  python bench/gpu_pretraining.py --from_results=RUN.jsonl[,RUN2.jsonl] --write_readme

bench/gpu_run.sh runs it on a GPU machine that has jax, torch and transformers but no
TensorFlow or keras (bench/README.md, "GPU pretraining step").
"""

import datetime
import json
import os
import shlex
import signal
import subprocess
import sys
import time

from absl import app
from absl import flags

# bench/ and the repository root: the GPU machines run it from a checkout, uninstalled.
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]

import common  # pylint: disable=g-import-not-at-top,wrong-import-position
import flops  # pylint: disable=g-import-not-at-top,wrong-import-position
import stats  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_list("sizes", ["base", "large"], "Encoder sizes (bert_tf.configs: tiny, "
                  "mini, small, medium, base, large).")
flags.DEFINE_list("seqs", ["128", "512"], "Sequence lengths.")
flags.DEFINE_list("batch_sizes", ["128:64", "512:16"], "SEQ:BATCH pairs: the batch "
                  "sizes run at each sequence length (several per length allowed).")
flags.DEFINE_list("predictions", ["128:20", "512:76"], "SEQ:P pairs: masked positions "
                  "per sequence; other lengths get round(0.15 x SEQ).")
flags.DEFINE_list("sides", ["ours", "hf_eager", "hf_compile"], "Which steps to time: ours "
                  "(bert_tf on JAX), hf_eager, hf_compile (Hugging Face in torch).")
flags.DEFINE_list("matmul", ["jax", "torch"], "Frameworks that measure the matmul rate "
                  "MFU divides by (the higher rate is used).")
flags.DEFINE_string("matmul_shapes", "8192x8192x8192,8192x1024x4096,8192x4096x1024",
                    "MxKxN shapes of the matmul-rate measurement.")
flags.DEFINE_integer("steps", 20, "Timed steps per configuration.")
flags.DEFINE_integer("warmup_steps", 3, "Untimed steps after the first (compiling) one.")
flags.DEFINE_enum("precision", "bf16", ["bf16", "float32"], "bf16: Keras mixed_bfloat16, "
                  "torch bf16 autocast, bf16 matmul rate; float32 (for CPUs, where bf16 "
                  "may be slow): everything in float32.")
flags.DEFINE_enum("device", "gpu", ["gpu", "cpu", "any"], "gpu: every worker fails "
                  "unless jax and torch see a CUDA GPU; cpu: GPUs hidden.")
flags.DEFINE_enum("hf_mlm", "gathered", ["gathered", "all"], "Hugging Face's masked-LM "
                  "head: at the masked positions only, as ours (gathered), or the stock "
                  "BertForPreTraining forward with labels, over all positions (all).")
flags.DEFINE_integer("timeout_s", 300, "Longest run of one worker process, seconds.")
flags.DEFINE_integer("time_budget_s", 0, "Whole-run limit, seconds (0: none): a worker "
                     "gets at most what is left, and none starts with under 30 s left "
                     "(recorded as skipped).")
flags.DEFINE_string("output", os.path.join(common.RESULTS_DIR, "gpu_pretraining.jsonl"),
                    "JSON-lines file of the run (rewritten): one line for the run, one "
                    "per matmul measurement, one per configuration.")
flags.DEFINE_string("worker_logs", common.LOG_DIR, "Where each worker's stderr goes.")
flags.DEFINE_list("from_results", [], "Time nothing: print the table of these "
                  "JSON-lines files of earlier runs (with --write_readme, into "
                  "bench/README.md). A configuration measured in several keeps the "
                  "last run's figure; one skipped or failed there keeps an earlier "
                  "run's.")
flags.DEFINE_bool("write_readme", False, "Rebuild the gpu_pretraining section of "
                  "bench/README.md from the run.")

SECTION = "gpu_pretraining"
SYSTEMS = {"ours": "bert_tf (JAX)", "hf_eager": "HF torch eager",
           "hf_compile": "HF torch.compile"}
# A worker is not started with less time than this left in --time_budget_s.
MIN_WORKER_S = 30


def model_flops_per_sequence(config, seq_length: int, predictions: int) -> float:
  """Training FLOPs of one sequence of a bert_tf.configs.EncoderConfig (bench/flops.py)."""
  return flops.pretraining_flops_per_sequence(
      config.num_layers, config.hidden_size, config.intermediate_size, config.vocab_size,
      seq_length, predictions)


def seq_pairs(entries) -> list:
  """['128:64', '512:16'] -> [(128, 64), (512, 16)]."""
  pairs = []
  for entry in entries:
    seq, _, value = entry.partition(":")
    if not value:
      raise app.UsageError(f"'{entry}': expected SEQ:VALUE, e.g. 128:64")
    pairs.append((int(seq), int(value)))
  return pairs


def plan() -> list:
  """The configurations of the run, in order: (size, seq, batch, predictions, side).

  Sequence length outermost, then side (in --sides order), then size and batch: a run
  cut short by --time_budget_s loses the last sides of the longest sequences first
  (torch.compile, by default, whose compilation takes longest)."""
  batches = seq_pairs(FLAGS.batch_sizes)
  predictions = dict(seq_pairs(FLAGS.predictions))
  unknown = set(FLAGS.sides) - set(SYSTEMS)
  if unknown:
    raise app.UsageError(f"--sides: unknown {sorted(unknown)}; known: {list(SYSTEMS)}")
  configurations = []
  for seq in (int(s) for s in FLAGS.seqs):
    seq_batches = [b for s, b in batches if s == seq]
    if not seq_batches:
      raise app.UsageError(f"--batch_sizes has no batch for seq {seq}")
    for side in FLAGS.sides:
      for size in FLAGS.sizes:
        for batch in seq_batches:
          configurations.append((size, seq, batch,
                                 predictions.get(seq, round(0.15 * seq)), side))
  return configurations


def common_arguments() -> list:
  """The worker arguments every process of the run shares."""
  return ["--precision", FLAGS.precision, "--device", FLAGS.device]


def reproduce_command(size: str, seq: int, batch: int, predictions: int,
                      side: str) -> str:
  """The command that measures one configuration again, with the matmul rate its MFU
  divides by."""
  args = [f"--sizes={size}", f"--seqs={seq}", f"--batch_sizes={seq}:{batch}",
          f"--predictions={seq}:{predictions}", f"--sides={side}",
          f"--steps={FLAGS.steps}", f"--warmup_steps={FLAGS.warmup_steps}",
          f"--precision={FLAGS.precision}", f"--device={FLAGS.device}",
          f"--matmul={','.join(FLAGS.matmul)}", f"--matmul_shapes={FLAGS.matmul_shapes}"]
  if side.startswith("hf_") and FLAGS.hf_mlm != "gathered":
    args.append(f"--hf_mlm={FLAGS.hf_mlm}")
  return "python bench/gpu_pretraining.py " + " ".join(shlex.quote(a) for a in args)


class Run:
  """Runs workers one at a time within the time budget and records their results."""

  def __init__(self, output: str, log_dir: str, timeout_s: int, budget_s: int):
    self.output = output
    self.log_dir = log_dir
    self.timeout_s = timeout_s
    self.deadline = time.monotonic() + budget_s if budget_s else None
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    os.makedirs(log_dir, exist_ok=True)
    open(output, "w").close()

  def record(self, entry: dict) -> dict:
    with open(self.output, "a") as f:
      f.write(json.dumps(entry, sort_keys=True) + "\n")
    return entry

  def work(self, name: str, args: list) -> dict:
    """Runs bench/gpu_pretraining_worker.py with `args`; returns its RESULT, or
    {"status": "failed" | "timeout" | "skipped", "error": ...}."""
    timeout = self.timeout_s
    if self.deadline is not None:
      timeout = min(timeout, int(self.deadline - time.monotonic()))
      if timeout < MIN_WORKER_S:
        return {"status": "skipped", "error": "out of --time_budget_s"}
    log_path = os.path.join(self.log_dir, f"gpu_pretraining_{name}.log")
    argv = [sys.executable, os.path.join(common.BENCH_DIR, "gpu_pretraining_worker.py"),
            *args]
    start = time.monotonic()
    with open(log_path, "w") as log:
      # A session of its own, so that a timeout also ends the processes the worker
      # started (torch.compile's compile workers) and nothing keeps the device busy.
      process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True,
                                 cwd=common.REPO_ROOT, start_new_session=True)
      try:
        stdout, _ = process.communicate(timeout=timeout)
      except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return {"status": "timeout", "error": f"no result after {timeout} s; see {log_path}",
                "process_s": time.monotonic() - start}
    lines = [l for l in stdout.splitlines() if l.startswith("RESULT ")]
    if process.returncode or not lines:
      with open(log_path) as log:
        tail = log.read().strip().splitlines()[-3:]
      return {"status": "failed", "error": f"exit {process.returncode}: " + " | ".join(tail),
              "process_s": time.monotonic() - start}
    return {"status": "ok", **json.loads(lines[-1][len("RESULT "):]),
            "process_s": time.monotonic() - start}


def measure_matmul(run: Run) -> float:
  """Measures the matmul rate in each --matmul framework; returns the highest (FLOP/s),
  nan when none finished."""
  rates = []
  for framework in FLAGS.matmul:
    result = run.work(f"matmul_{framework}", [
        "--side", f"matmul_{framework}", "--matmul_shapes", FLAGS.matmul_shapes,
        *common_arguments()])
    run.record({"record": "matmul", "side": f"matmul_{framework}", **result})
    if result["status"] == "ok":
      rate = result["flops_per_second"]
      print(f"  matmul rate ({result['framework']}, {result['device']}): "
            f"{rate / 1e12:.2f} TFLOP/s ({FLAGS.precision}, best median over "
            f"{FLAGS.matmul_shapes})", flush=True)
      rates.append(rate)
    else:
      print(f"  matmul_{framework}: {result['status']}: {result['error']}", flush=True)
  return max(rates, default=float("nan"))


def figures(result: dict, batch: int, seq: int, flops_per_sequence: float,
            matmul_rate: float) -> dict:
  """The derived figures of a worker's step times (seconds)."""
  spread = stats.median_spread(result["step_seconds"])
  step = spread["median"]
  model_rate = flops_per_sequence * batch / step
  return {"median_step_ms": 1e3 * step, "q1_step_ms": 1e3 * spread["q1"],
          "q3_step_ms": 1e3 * spread["q3"], "min_step_ms": 1e3 * spread["min"],
          "max_step_ms": 1e3 * spread["max"], "sequences_per_second": batch / step,
          "tokens_per_second": batch * seq / step, "model_flops_per_second": model_rate,
          "mfu": model_rate / matmul_rate}


def measure() -> None:
  """Times every configuration of the plan, writing its records to --output."""
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  configurations = plan()
  run = Run(FLAGS.output, FLAGS.worker_logs, FLAGS.timeout_s, FLAGS.time_budget_s)
  # The command without the places this machine wrote to.
  command = " ".join(a for a in common.command_line().split(" ")
                     if not a.startswith(("--output=", "--worker_logs=")))
  header = {"record": "run", "command": command,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%d %H:%M UTC"),
            "host": common.machine_description(), "precision": FLAGS.precision,
            "hf_mlm": FLAGS.hf_mlm}
  print(f"{len(configurations)} configurations, {FLAGS.steps} timed steps each "
        f"(after the first and {FLAGS.warmup_steps} warm-up steps); "
        f"results to {FLAGS.output}", flush=True)
  matmul_rate = measure_matmul(run)
  run.record({**header, "matmul_flops_per_second": matmul_rate})
  for size, seq, batch, predictions, side in configurations:
    name = f"{size}_{seq}x{batch}_{side}"
    result = run.work(name, [
        "--side", side, "--size", size, "--batch_size", str(batch), "--seq_length",
        str(seq), "--predictions", str(predictions), "--steps", str(FLAGS.steps),
        "--warmup_steps", str(FLAGS.warmup_steps), "--hf_mlm", FLAGS.hf_mlm,
        *common_arguments()])
    entry = {"record": "step", "side": side, "system": SYSTEMS[side], "size": size,
             "seq_length": seq, "batch_size": batch, "predictions": predictions,
             "precision": FLAGS.precision, "matmul_flops_per_second": matmul_rate,
             "command": reproduce_command(size, seq, batch, predictions, side), **result}
    if result["status"] == "ok":
      sequence_flops = model_flops_per_sequence(configs.EncoderConfig.from_size(size), seq,
                                       predictions)
      entry.update(model_flops_per_sequence=sequence_flops,
                   **figures(result, batch, seq, sequence_flops, matmul_rate))
      print(f"  {size} {seq}x{batch} {SYSTEMS[side]}: {entry['median_step_ms']:.1f} ms "
            f"[{entry['q1_step_ms']:.1f}-{entry['q3_step_ms']:.1f}], "
            f"{entry['sequences_per_second']:.1f} seq/s, MFU {100 * entry['mfu']:.1f}%, "
            f"first step {result['first_step_s']:.1f} s, loss {result['loss_first']:.3f}"
            f" -> {result['loss_last']:.3f}", flush=True)
      if result.get("tensorflow_loaded"):
        print(f"  warning: TensorFlow was imported by {name}", flush=True)
    else:
      print(f"  {size} {seq}x{batch} {SYSTEMS[side]}: {result['status']}: "
            f"{result['error']}", flush=True)
    run.record(entry)


def read_records(path: str) -> list:
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def configuration(record: dict) -> tuple:
  return (record["size"], record["seq_length"], record["batch_size"],
          record["predictions"], record["side"])


def merge_steps(runs: list) -> list:
  """The step records of several runs, one per configuration in first-seen order: the
  last run's where it is ok, else the last ok one, else the last one."""
  chosen = {}
  for records in runs:
    for r in records:
      if r["record"] != "step":
        continue
      key = configuration(r)
      if key not in chosen or r["status"] == "ok" or chosen[key]["status"] != "ok":
        chosen[key] = r
  return list(chosen.values())


def run_note(records: list, used: list) -> str:
  """One run's line under the table: when, its command, device, precision and its
  MFU denominator; `used` are its step records that made it into the table."""
  run = next(r for r in records if r["record"] == "run")
  matmul = [r for r in records if r["record"] == "matmul" and r["status"] == "ok"]
  devices = sorted({r["device"] for r in used + matmul if r.get("device")})
  rate = run.get("matmul_flops_per_second", float("nan"))
  head = ("at the masked positions only" if run["hf_mlm"] == "gathered"
          else "at every position")
  rows = sum(r["status"] == "ok" for r in used)
  return (f"Run of {run['date']} ({rows} row{'' if rows == 1 else 's'}): "
          f"`{run['command']}`; device {', '.join(devices) or 'unknown'}; "
          f"{run['precision']}; Hugging Face's masked-LM head {head}. MFU denominator: " +
          ", ".join(f"{r['framework']} {r['flops_per_second'] / 1e12:.2f} TFLOP/s"
                    for r in matmul) +
          f" (dense {run['precision']} matmul, best median over shapes; used: "
          f"{rate / 1e12:.2f} TFLOP/s).")


def report(runs: list) -> str:
  """The markdown table of one or more runs' records (each run a list of records, as
  read_records gives), with the runs' notes and each row's command."""
  steps = merge_steps(runs)
  ours = {(r["size"], r["seq_length"], r["batch_size"]): r["sequences_per_second"]
          for r in steps if r["side"] == "ours" and r["status"] == "ok"}
  rows, commands = [], []
  for r in steps:
    shape = f"{r['seq_length']} x {r['batch_size']} (P {r['predictions']})"
    if r["status"] != "ok":
      rows.append([r["size"], shape, r["system"], r["status"], "", "", "", "", "", ""])
    else:
      base = ours.get((r["size"], r["seq_length"], r["batch_size"]))
      memory = r.get("peak_memory_mb")
      rows.append([
          r["size"], shape, r["system"],
          f"{r['median_step_ms']:.1f} [{r['q1_step_ms']:.1f}-{r['q3_step_ms']:.1f}]",
          f"{r['min_step_ms']:.1f}-{r['max_step_ms']:.1f}",
          f"{r['sequences_per_second']:,.1f}", f"{100 * r['mfu']:.1f}%",
          f"{r['first_step_s']:.1f}", f"{memory:,.0f}" if memory else "n/a",
          f"{base / r['sequences_per_second']:.2f}x" if base and r["side"] != "ours"
          else ""])
    failure = "" if r["status"] == "ok" else f" ({r['status']}: {r['error']})"
    commands.append(f"- {r['size']} {shape}, {r['system']}: `{r['command']}`{failure}")
  notes = []
  for records in runs:
    notes.append(run_note(records, used=[r for r in steps if r in records]))
  if len(runs) > 1:
    notes.append("Each row's MFU divides by its own run's matmul rate; each run started "
                 "its own machine.")
  frameworks = sorted({r["framework"] for r in steps if r.get("framework")})
  if frameworks:
    notes.append("Frameworks: " + "; ".join(frameworks) + ".")
  header = ["size", "seq x batch", "system", "median step ms [IQR]", "min-max ms",
            "seq/s", "MFU", "first step s", "peak MiB", "ours/this"]
  return (common.markdown_table(header, rows) + "\n\n" + "\n\n".join(notes) + "\n\n" +
          "\n".join(commands))


def main(argv):
  del argv
  if FLAGS.write_readme:
    common.require_readme_section(SECTION)
  if not FLAGS.from_results:
    measure()
  table = report([read_records(path) for path in FLAGS.from_results or [FLAGS.output]])
  print("\n" + table, flush=True)
  if FLAGS.write_readme:
    common.update_readme_section(SECTION, table)


if __name__ == "__main__":
  app.run(main)
