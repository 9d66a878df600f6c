"""Pretraining-step throughput on one accelerator: bert_tf's JAX training step against
Hugging Face BertForPreTraining in torch (eager and torch.compile), with no TensorFlow,
and where each step's device time goes.

Both sides train on one synthetic batch of the real shapes (seq 128 with 20 masked
positions, seq 512 with 76); what each side's step is, and the timing protocols (first
step apart, synced and back to back), are bench/gpu_worker.py's docstring. Every
configuration runs in a process of its own with a timeout, and each finished one is
appended to --output (JSON lines) at once, so a run cut short keeps what it measured; at
the end the run prints its tables and the command that reproduces each figure. MFU is
model FLOPs/s (bert_tf.utils.model_flops, the same for every side and variant) over the
dense matmul rate the same run measured in the side's own framework
(bench/matmul_peak.py).
--profile records --profile_steps more steps under each framework's profiler
(bench/kernel_profile.py); the traces stay in --profile_dir.

--variant A/Bs settings in the same run: NAME=SETTING[;SETTING...], each SETTING one of
  section.key=value    a bert_tf config override (model.encoder.* and optimizer.* reach
                       both sides, runtime.* ours: its speed path, float8, ...)
  env:NAME=VALUE       an environment variable of the variant's worker processes
  xla:--flag=value     appended to the variant's XLA_FLAGS
Each variant runs for every --variant_sides side after that side's base configuration:

  python -m bench.gpu_pretraining --sizes=large --seqs=128 --profile \
      --variant='fp8=runtime.float8_training=true' \
      --variant='nodrop=model.encoder.dropout_rate=0;model.encoder.attention_dropout_rate=0' \
      --variant='nocmdbuf=xla:--xla_gpu_enable_command_buffer='

How to run it on a GPU machine (`bash bench/gpu.sh pretraining`, with jax, torch and
transformers but no TensorFlow), on a CPU, and from earlier results: bench/README.md.
"""

import datetime
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
from typing import Dict, List, NamedTuple, Sequence, Tuple

from absl import app
from absl import flags

from bench import common
from bench import flops
from bench import kernel_profile
from bench import stats
from bench.peers import protocol
from bert_tf.utils import model_flops

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
flags.DEFINE_list("matmul", ["jax", "torch"], "Frameworks whose matmul rate is measured: "
                  "each side's MFU divides by its own framework's (ours: jax, Hugging "
                  "Face: torch; n/a where it is not measured).")
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
flags.DEFINE_integer("back_to_back_rounds", 3, "Rounds of --steps steps dispatched back "
                     "to back and waited for once.")
flags.DEFINE_multi_string("variant", [], "NAME=SETTING[;SETTING...]: a configuration to "
                          "A/B against the base one (module docstring): config overrides "
                          "key.sub=value, env:NAME=VALUE, xla:--flag=value.")
flags.DEFINE_list("variant_sides", ["ours"], "The sides each --variant runs for.")
flags.DEFINE_bool("base", True, "Time each side in its base configuration too (without "
                  "variants).")
flags.DEFINE_bool("profile", False, "Profile --profile_steps more steps of every "
                  "configuration: device time by kernel category, largest kernels.")
flags.DEFINE_integer("profile_steps", 3, "Steps each profile records, back to back.")
flags.DEFINE_string("profile_dir", os.path.join(common.LOG_DIR, "gpu_profiles"),
                    "Where the profiles' traces go, one folder per configuration.")
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
                  "bench/results/gpu_pretraining.md). A configuration measured in several keeps the "
                  "last run's figure; one skipped or failed there keeps an earlier "
                  "run's.")
flags.DEFINE_bool("write_readme", False, "Rebuild the table of "
                  "bench/results/gpu_pretraining.md (and docs/benchmark-tables.md) from the run.")

SECTION = "gpu_pretraining"
SYSTEMS = {"ours": "bert_tf (JAX)", "hf_eager": "HF torch eager",
           "hf_compile": "HF torch.compile"}
# The framework of each side's products: its MFU divides by that framework's rate.
SIDE_FRAMEWORKS = {"ours": "jax", "hf_eager": "torch", "hf_compile": "torch"}
# A worker is not started with less time than this left in --time_budget_s.
MIN_WORKER_S = 30


# --variant: a name and settings, NAME=SETTING[;SETTING...] (the module docstring), so
# that a lever added to the model (a runtime field, an environment variable, an XLA
# flag) is measured without changing the benchmark.

class Variant(NamedTuple):
  """A --variant: its name ("" for the base configuration), the worker's config
  overrides, the environment variables it sets, the XLA flags it appends, and its
  text as given."""

  name: str = ""
  overrides: Tuple[str, ...] = ()
  env: Dict[str, str] = {}
  xla_flags: Tuple[str, ...] = ()
  spec: str = ""

  def runtime_overrides(self) -> List[str]:
    """The overrides of the runtime section, which only bert_tf's step has."""
    return [o for o in self.overrides if o.split("=", 1)[0].strip().startswith("runtime.")]

  def environment(self, base: Dict[str, str]) -> Dict[str, str]:
    """`base` (an environment) with this variant's variables and XLA flags."""
    env = dict(base, **self.env)
    if self.xla_flags:
      env["XLA_FLAGS"] = " ".join([env.get("XLA_FLAGS", ""), *self.xla_flags]).strip()
    return env


def parse_variant(spec: str) -> Variant:
  """'fp8=runtime.float8_training=true;xla:--flag=1' -> its Variant.

  Raises:
    ValueError: no NAME=, a name other than letters, digits, '_', '-' and '.' (it
      names log files), or a setting that is none of the three kinds.
  """
  name, separator, settings = spec.partition("=")
  if not separator or not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name == "base":
    raise ValueError(f"--variant '{spec}': expected NAME=SETTING[;SETTING...], "
                     "NAME of letters, digits, '_', '-', '.' (not 'base')")
  overrides, env, xla_flags = [], {}, []
  for setting in (s.strip() for s in settings.split(";")):
    if setting.startswith("env:") and "=" in setting:
      key, _, value = setting[len("env:"):].partition("=")
      env[key] = value
    elif setting.startswith("xla:"):
      xla_flags.append(setting[len("xla:"):])
    elif "=" in setting:
      overrides.append(setting)
    elif setting:
      raise ValueError(f"--variant '{spec}': '{setting}' is no key.sub=value, "
                       "env:NAME=VALUE or xla:--flag")
  return Variant(name, tuple(overrides), env, tuple(xla_flags), spec)


def parse_variants(specs: Sequence[str]) -> List[Variant]:
  """The Variants of --variant's values, their config overrides checked against
  bert_tf's schema, so that a typo fails before any device time is spent.

  Raises:
    ValueError: a malformed spec, a name given twice, or an override that is no
      config field (naming the spec).
  """
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  parsed = [parse_variant(spec) for spec in specs]
  names = [v.name for v in parsed]
  if len(set(names)) != len(names):
    raise ValueError(f"--variant: names repeat: {names}")
  for variant in parsed:
    try:
      configs.ExperimentConfig().override(list(variant.overrides))
    except configs.ConfigError as e:
      raise ValueError(f"--variant '{variant.spec}': {e}") from None
  return parsed


# The run.

def model_flops_per_sequence(config, seq_length: int, predictions: int) -> float:
  """Training FLOPs of one sequence of a bert_tf.configs.EncoderConfig
  (bert_tf.utils.model_flops)."""
  return model_flops.pretraining_flops_per_sequence(
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


def variants() -> list:
  """The --variant settings, parsed and checked (parse)."""
  try:
    return parse_variants(FLAGS.variant)
  except ValueError as e:
    raise app.UsageError(str(e)) from None


def plan() -> list:
  """The configurations of the run, in order: (size, seq, batch, predictions, side,
  Variant).

  Sequence length outermost, then side (in --sides order), then size and batch, then
  the base configuration and each variant of that side: a run cut short by
  --time_budget_s loses the last sides of the longest sequences first (torch.compile,
  by default, whose compilation takes longest)."""
  batches = seq_pairs(FLAGS.batch_sizes)
  predictions = dict(seq_pairs(FLAGS.predictions))
  unknown = set(FLAGS.sides + FLAGS.variant_sides) - set(SYSTEMS)
  if unknown:
    raise app.UsageError(f"--sides: unknown {sorted(unknown)}; known: {list(SYSTEMS)}")
  extra = variants()
  peers = [side for side in FLAGS.variant_sides if side != "ours"]
  for variant in extra:
    if peers and variant.runtime_overrides():
      raise app.UsageError(f"--variant '{variant.spec}': {variant.runtime_overrides()} are "
                           f"bert_tf's runtime settings; leave {peers} out of "
                           "--variant_sides")
  configurations = []
  for seq in (int(s) for s in FLAGS.seqs):
    seq_batches = [b for s, b in batches if s == seq]
    if not seq_batches:
      raise app.UsageError(f"--batch_sizes has no batch for seq {seq}")
    for side in FLAGS.sides:
      side_variants = ([Variant()] if FLAGS.base else []) + (
          extra if side in FLAGS.variant_sides else [])
      for size in FLAGS.sizes:
        for batch in seq_batches:
          for variant in side_variants:
            configurations.append((size, seq, batch,
                                   predictions.get(seq, round(0.15 * seq)), side, variant))
  return configurations


def common_arguments() -> list:
  """The worker arguments every process of the run shares."""
  return ["--precision", FLAGS.precision, "--device", FLAGS.device]


def reproduce_command(size: str, seq: int, batch: int, predictions: int, side: str,
                      variant: Variant = Variant()) -> str:
  """The command that measures one configuration again, with the matmul rate its MFU
  divides by."""
  args = [f"--sizes={size}", f"--seqs={seq}", f"--batch_sizes={seq}:{batch}",
          f"--predictions={seq}:{predictions}", f"--sides={side}",
          f"--steps={FLAGS.steps}", f"--warmup_steps={FLAGS.warmup_steps}",
          f"--back_to_back_rounds={FLAGS.back_to_back_rounds}",
          f"--precision={FLAGS.precision}", f"--device={FLAGS.device}",
          f"--matmul={','.join(FLAGS.matmul)}", f"--matmul_shapes={FLAGS.matmul_shapes}"]
  if side.startswith("hf_") and FLAGS.hf_mlm != "gathered":
    args.append(f"--hf_mlm={FLAGS.hf_mlm}")
  if variant.name:
    args += ["--nobase", f"--variant={variant.spec}", f"--variant_sides={side}"]
  if FLAGS.profile:
    args += ["--profile", f"--profile_steps={FLAGS.profile_steps}"]
  return "python -m bench.gpu_pretraining " + " ".join(shlex.quote(a) for a in args)


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

  def work(self, name: str, args: list,
           variant: Variant = Variant()) -> dict:
    """Runs bench/gpu_worker.py with `args` in `variant`'s environment;
    returns its RESULT, or {"status": "failed" | "timeout" | "skipped", "error": ...}."""
    timeout = self.timeout_s
    if self.deadline is not None:
      timeout = min(timeout, int(self.deadline - time.monotonic()))
      if timeout < MIN_WORKER_S:
        return {"status": "skipped", "error": "out of --time_budget_s"}
    log_path = os.path.join(self.log_dir, f"gpu_pretraining_{name}.log")
    argv = [sys.executable, "-m", "bench.gpu_worker", *args]
    start = time.monotonic()
    with open(log_path, "w") as log:
      # A session of its own, so that a timeout also ends the processes the worker
      # started (torch.compile's compile workers) and nothing keeps the device busy.
      process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True,
                                 cwd=common.REPO_ROOT, start_new_session=True,
                                 env=variant.environment(os.environ))
      try:
        stdout, _ = process.communicate(timeout=timeout)
      except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return {"status": "timeout", "error": f"no result after {timeout} s; see {log_path}",
                "process_s": time.monotonic() - start}
    result = protocol.last_payload(stdout, "RESULT")
    if process.returncode or result is None:
      with open(log_path) as log:
        tail = log.read().strip().splitlines()[-3:]
      return {"status": "failed", "error": f"exit {process.returncode}: " + " | ".join(tail),
              "process_s": time.monotonic() - start}
    return {"status": "ok", **result, "process_s": time.monotonic() - start}


def measure_matmul(run: Run) -> dict:
  """Measures the matmul rate in each --matmul framework: {framework: FLOP/s} of those
  that finished."""
  rates = {}
  for framework in FLAGS.matmul:
    result = run.work(f"matmul_{framework}", [
        "--side", f"matmul_{framework}", "--matmul_shapes", FLAGS.matmul_shapes,
        *common_arguments()])
    run.record({"record": "matmul", "side": f"matmul_{framework}", **result})
    if result["status"] == "ok":
      rate = result["flops_per_second"]
      print(f"  matmul rate ({result['framework']}, {result['device']}): "
            f"{rate / 1e12:.2f} TFLOP/s ({FLAGS.precision}, fastest over "
            f"{FLAGS.matmul_shapes})", flush=True)
      rates[framework] = rate
    else:
      print(f"  matmul_{framework}: {result['status']}: {result['error']}", flush=True)
  return rates


def encoder_of(size: str, variant: Variant):
  """The bert_tf.configs.EncoderConfig a configuration trains (the worker's)."""
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  experiment = configs.ExperimentConfig().override({"model": {"encoder": {"size": size}}})
  return experiment.override(list(variant.overrides)).model.encoder


def figures(result: dict, batch: int, seq: int, flops_per_sequence: float,
            matmul_rate: float) -> dict:
  """The derived figures of a worker's step times (seconds): synced (the median step
  with its spread) and back to back (the median round)."""
  spread = stats.median_spread(result["step_seconds"])
  step = spread["median"]
  model_rate = flops_per_sequence * batch / step
  back = statistics.median(result["back_to_back_step_seconds"])
  return {"median_step_ms": 1e3 * step, "q1_step_ms": 1e3 * spread["q1"],
          "q3_step_ms": 1e3 * spread["q3"], "min_step_ms": 1e3 * spread["min"],
          "max_step_ms": 1e3 * spread["max"], "sequences_per_second": batch / step,
          "tokens_per_second": batch * seq / step, "model_flops_per_second": model_rate,
          "mfu": model_rate / matmul_rate, "back_to_back_step_ms": 1e3 * back,
          "back_to_back_sequences_per_second": batch / back,
          "back_to_back_mfu": flops_per_sequence * batch / back / matmul_rate}


def worker_arguments(size, seq, batch, predictions, side, variant, name) -> list:
  """The worker's arguments for one configuration."""
  args = ["--side", side, "--size", size, "--batch_size", str(batch), "--seq_length",
          str(seq), "--predictions", str(predictions), "--steps", str(FLAGS.steps),
          "--warmup_steps", str(FLAGS.warmup_steps), "--hf_mlm", FLAGS.hf_mlm,
          "--back_to_back_rounds", str(FLAGS.back_to_back_rounds), *common_arguments()]
  for override in variant.overrides:
    args += ["--override", override]
  if FLAGS.profile:
    args += ["--profile_dir", os.path.join(FLAGS.profile_dir, name), "--profile_steps",
             str(FLAGS.profile_steps)]
  return args


def progress_line(size, seq, batch, label, entry) -> str:
  """A finished configuration's line of the run's output."""
  if entry["status"] != "ok":
    return f"  {size} {seq}x{batch} {label}: {entry['status']}: {entry['error']}"
  line = (f"  {size} {seq}x{batch} {label}: synced {entry['median_step_ms']:.1f} ms "
          f"[{entry['q1_step_ms']:.1f}-{entry['q3_step_ms']:.1f}], "
          f"{entry['sequences_per_second']:.1f} seq/s, MFU "
          f"{flops.utilisation_text(entry['mfu'], 1)}; "
          f"back to back {entry['back_to_back_step_ms']:.1f} ms, "
          f"{entry['back_to_back_sequences_per_second']:.1f} seq/s, MFU "
          f"{flops.utilisation_text(entry['back_to_back_mfu'], 1)}; first step "
          f"{entry['first_step_s']:.1f} s,"
          f" loss {entry['loss_first']:.3f} -> {entry['loss_last']:.3f}")
  if entry.get("profile"):
    line += "\n" + "\n".join("    " + l for l in kernel_profile.table(
        entry["profile"]).splitlines())
  if entry.get("tensorflow_loaded"):
    line += "\n  warning: TensorFlow was imported by this configuration's worker"
  return line


def measure() -> None:
  """Times every configuration of the plan, writing its records to --output."""
  configurations = plan()
  run = Run(FLAGS.output, FLAGS.worker_logs, FLAGS.timeout_s, FLAGS.time_budget_s)
  # The command without the places this machine wrote to.
  command = " ".join(a for a in common.command_line().split(" ")
                     if not a.startswith(("--output=", "--worker_logs=", "--profile_dir=")))
  header = {"record": "run", "command": command,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%d %H:%M UTC"),
            "host": common.machine_description(), "precision": FLAGS.precision,
            "hf_mlm": FLAGS.hf_mlm}
  print(f"{len(configurations)} configurations, {FLAGS.steps} timed steps each "
        f"(after the first and {FLAGS.warmup_steps} warm-up steps), then "
        f"{FLAGS.back_to_back_rounds} rounds back to back; results to {FLAGS.output}",
        flush=True)
  matmul_rates = measure_matmul(run)
  run.record({**header, "matmul_flops_per_second": matmul_rates})
  for size, seq, batch, predictions, side, variant in configurations:
    name = f"{size}_{seq}x{batch}_{side}" + (f"_{variant.name}" if variant.name else "")
    matmul_rate = matmul_rates.get(SIDE_FRAMEWORKS[side], float("nan"))
    result = run.work(name, worker_arguments(size, seq, batch, predictions, side, variant,
                                             name), variant)
    entry = {"record": "step", "side": side, "system": SYSTEMS[side], "size": size,
             "seq_length": seq, "batch_size": batch, "predictions": predictions,
             "variant": variant.name, "variant_spec": variant.spec,
             "precision": FLAGS.precision, "matmul_flops_per_second": matmul_rate,
             "command": reproduce_command(size, seq, batch, predictions, side, variant),
             **result}
    if result["status"] == "ok":
      sequence_flops = model_flops_per_sequence(encoder_of(size, variant), seq, predictions)
      entry.update(model_flops_per_sequence=sequence_flops,
                   **figures(result, batch, seq, sequence_flops, matmul_rate))
    print(progress_line(size, seq, batch, system(entry), entry), flush=True)
    run.record(entry)


# The tables of runs, from their JSON-lines records: one "run" line (command, date,
# precision, the MFU denominator), one "matmul" line per framework, one "step" line per
# configuration (size, seq_length, batch_size, predictions, side, variant; "" is the
# base configuration, as in records written before variants existed). Several runs
# merge: a configuration keeps the last run's figure, or an earlier run's where a
# later one skipped it.

def read_records(path: str) -> list:
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def configuration(record: dict) -> tuple:
  return (record["size"], record["seq_length"], record["batch_size"],
          record["predictions"], record["side"], record.get("variant", ""))


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


def system(record: dict) -> str:
  """The row's system: 'bert_tf (JAX)', or with its variant, 'bert_tf (JAX) [fp8]'."""
  variant = record.get("variant", "")
  return f"{record['system']} [{variant}]" if variant else record["system"]


def run_note(records: list, used: list) -> str:
  """One run's line under the table: when, its command, device, precision and its
  MFU denominator; `used` are its step records that made it into the table."""
  run = next(r for r in records if r["record"] == "run")
  matmul = [r for r in records if r["record"] == "matmul" and r["status"] == "ok"]
  devices = sorted({r["device"] for r in used + matmul if r.get("device")})
  # A run records its rate per framework; runs before those divided by the higher one.
  rate = run.get("matmul_flops_per_second", float("nan"))
  denominator = ("fastest over shapes; each side against its own framework's"
                 if isinstance(rate, dict) else
                 f"best median over shapes; used: {rate / 1e12:.2f} TFLOP/s")
  head = ("at the masked positions only" if run["hf_mlm"] == "gathered"
          else "at every position")
  rows = sum(r["status"] == "ok" for r in used)
  return (f"Run of {run['date']} ({rows} row{'' if rows == 1 else 's'}): "
          f"`{run['command']}`; device {', '.join(devices) or 'unknown'}; "
          f"{run['precision']}; Hugging Face's masked-LM head {head}. MFU denominator: " +
          (", ".join(f"{r['framework']} {r['flops_per_second'] / 1e12:.2f} TFLOP/s"
                     for r in matmul) or "not measured") +
          f" (dense {run['precision']} matmul, {denominator}).")


def _ratio(base, value) -> str:
  return f"{base / value:.2f}x" if base and value else ""


def step_rows(steps: list) -> list:
  """The main table's rows: synced and back-to-back step times, throughput and MFU, and
  ours/this: the base configuration of bert_tf's seq/s over this row's."""
  ours = {(r["size"], r["seq_length"], r["batch_size"]): r for r in steps
          if r["side"] == "ours" and not r.get("variant") and r["status"] == "ok"}
  rows = []
  for r in steps:
    shape = f"{r['seq_length']} x {r['batch_size']} (P {r['predictions']})"
    if r["status"] != "ok":
      rows.append([r["size"], shape, system(r), r["status"]] + [""] * 9)
      continue
    base = ours.get((r["size"], r["seq_length"], r["batch_size"]))
    is_base = base is r
    back = r.get("back_to_back_sequences_per_second")
    memory = r.get("peak_memory_mb")
    rows.append([
        r["size"], shape, system(r),
        f"{r['median_step_ms']:.1f} [{r['q1_step_ms']:.1f}-{r['q3_step_ms']:.1f}]",
        f"{r['back_to_back_step_ms']:.1f}" if back else "n/a",
        f"{r['sequences_per_second']:,.1f}", f"{back:,.1f}" if back else "n/a",
        flops.utilisation_text(r["mfu"], 1),
        flops.utilisation_text(r.get("back_to_back_mfu"), 1),
        f"{r['first_step_s']:.1f}", f"{memory:,.0f}" if memory else "n/a",
        "" if is_base or not base else _ratio(base["sequences_per_second"],
                                              r["sequences_per_second"]),
        "" if is_base or not base else _ratio(
            base.get("back_to_back_sequences_per_second"), back)])
  return rows


def profile_section(steps: list) -> str:
  """Where the device time goes, for the rows that were profiled: ms per step by
  category (and its share), then each row's largest kernels; "" when none was."""
  profiled = [r for r in steps if r["status"] == "ok" and r.get("profile")]
  if not profiled:
    return ""
  header = (["size", "seq x batch", "system", "device ms/step"] +
            [kernel_profile.LABELS[c] for c in kernel_profile.CATEGORIES] +
            ["kernels/step", "wall ms/step"])
  rows, kernels = [], []
  for r in profiled:
    p = r["profile"]
    total = p["device_ms_per_step"]
    shape = f"{r['seq_length']} x {r['batch_size']}"
    rows.append([r["size"], shape, system(r), f"{total:.2f}"] +
                [f"{ms:.2f} ({100 * ms / total if total else 0:.0f}%)"
                 for ms in (p["categories_ms_per_step"][c]
                            for c in kernel_profile.CATEGORIES)] +
                [f"{p['kernels_per_step']:,.0f}", f"{p['wall_ms_per_step']:.1f}"])
    kernels.append(f"- {r['size']} {shape}, {system(r)} ({p['source']}): " + "; ".join(
        f"`{k['name']}` {k['ms_per_step']:.2f} ms x{k['calls_per_step']:g} "
        f"({kernel_profile.LABELS[k['category']]})" for k in p["top_kernels"]))
  steps_note = sorted({r["profile"]["steps"] for r in profiled})
  return ("Device time per step by kernel category (bench/kernel_profile.py; "
          f"{'/'.join(map(str, steps_note))} profiled steps back to back; kernels on "
          "several streams are summed; wall = the profiled steps' host clock):\n\n" +
          common.markdown_table(header, rows) + "\n\nLargest kernels per step:\n\n" +
          "\n".join(kernels))


def report(runs: list) -> str:
  """The markdown tables of one or more runs' records (each run a list of records, as
  read_records gives), with the runs' notes and each row's command."""
  steps = merge_steps(runs)
  commands = []
  for r in steps:
    shape = f"{r['seq_length']} x {r['batch_size']} (P {r['predictions']})"
    failure = "" if r["status"] == "ok" else f" ({r['status']}: {r['error']})"
    commands.append(f"- {r['size']} {shape}, {system(r)}: `{r['command']}`{failure}")
  notes = [run_note(records, used=[r for r in steps if r in records]) for records in runs]
  if len(runs) > 1:
    notes.append("Each row's MFU divides by its own run's matmul rate; each run started "
                 "its own machine.")
  frameworks = sorted({r["framework"] for r in steps if r.get("framework")})
  if frameworks:
    notes.append("Frameworks: " + "; ".join(frameworks) + ".")
  header = ["size", "seq x batch", "system", "synced step ms [IQR]", "back-to-back ms",
            "synced seq/s", "back-to-back seq/s", "MFU synced", "MFU back-to-back",
            "first step s", "peak MiB", "ours/this synced", "ours/this back-to-back"]
  sections = [common.markdown_table(header, step_rows(steps)), "\n\n".join(notes),
              profile_section(steps), "\n".join(commands)]
  return "\n\n".join(section for section in sections if section)


def main(argv):
  del argv
  if FLAGS.write_readme:
    common.require_table(SECTION)
  if not FLAGS.from_results:
    measure()
  table = report([read_records(path)
                             for path in FLAGS.from_results or [FLAGS.output]])
  print("\n" + table, flush=True)
  if FLAGS.write_readme:
    common.update_table(SECTION, table)


if __name__ == "__main__":
  app.run(main)
