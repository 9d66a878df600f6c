"""The whole trainer on one GPU without TensorFlow, and the GPU numerics: the prepared
run of `bash bench/gpu.sh trainer`, in three stages.

  --stage=prepare   (a CPU with TensorFlow, before the device run) the embedded corpus,
                    a WordPiece vocab learned from it (tools/build_vocab.py) and
                    pretraining TFRecords (tools/create_pretraining_data.py, seq 128,
                    20 predictions) into --data_dir, which the device run carries
  --stage=device    (the GPU machine: JAX, no TensorFlow) the phases below in order,
                    each one skipped, and recorded as skipped, when its estimate no
                    longer fits in --time_budget_s; results in --out
  --stage=compare   (a CPU with TensorFlow, after) the checkpoint trained on the device
                    exported by tools/export_saved_model.py (--kind=encoder), its
                    serve_token_ids answers against the GPU model's outputs

The device phases (PHASES, in this order):
  kernels        bench/gpu_worker.py --check=kernels: the Pallas attention and
                 residual LayerNorm against their XLA forms on the GPU, outputs and
                 gradients; attention=auto's check and fallback
  train          tools/train.py --backend=jax: --size pretraining from the records,
                 --train_steps steps with checkpoints, uninterrupted; then the same run
                 SIGKILLed once ckpt-{--kill_after}.h5 exists and rerun, which resumes:
                 the losses after the resume against the uninterrupted run's, and the
                 last checkpoints' arrays
  steps          bench/gpu_worker.py --check=steps: --numerics_steps steps on the GPU
                 (bf16 and float32) against the float32 CPU step, from one initialization
  export         a small model (--export_size, the learned vocab) trained by
                 tools/train.py; its checkpoint and params.yaml copied to --out and its
                 encoder's outputs on fixed ids (bench/gpu_worker.py --check=outputs)
  throughput     the trainer's sequences/s (its summaries, the compiling loop left out)
                 against bench/gpu_worker.py's step of the same shape, and
                 the host input's own rate (bench/gpu_worker.py --check=input)
  deterministic  the train phase again with XLA_FLAGS=--xla_gpu_deterministic_ops=true:
                 the resumed run's losses and checkpoint equal bit for bit

Every phase writes one JSON line to --out/trainer.jsonl as soon as it ends.
"""

import argparse
import glob
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

import numpy as np

from bench import common
from bench import gpu_worker
from bench.peers import protocol
from bert_tf.text import vocab as vocab_lib

PHASES = ("kernels", "train", "steps", "export", "throughput", "deterministic")
# Seconds each phase is expected to take on one H100 or H200 at the default flags
# (BERT-base's first step compiles in 35-55 s there; JAX_COMPILATION_CACHE_DIR spares
# the recompiles of a resumed run): a phase starts only with this much budget left.
ESTIMATE_S = {"kernels": 30, "train": 150, "steps": 60, "export": 45, "throughput": 60,
              "deterministic": 150}
DETERMINISTIC_FLAG = "--xla_gpu_deterministic_ops=true"
# Resumed losses against the uninterrupted run's without deterministic ops: bf16's
# rounding (2^-7) times a few reordered reductions.
RESUME_TOLERANCE = 2e-2
# SavedModel on a CPU against the GPU model (both float32, the GPU's products at
# "highest" precision): the largest difference over the largest magnitude.
EXPORT_TOLERANCE = 1e-4


def argument_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  add = parser.add_argument
  add("--stage", required=True, choices=("prepare", "device", "compare"))
  add("--data_dir", default=".gpu_data", help="The records and vocab (repo-relative).")
  add("--out", default="/tmp/bert_tf_gpu_trainer", help="device: the results' folder.")
  add("--work_dir", default="/tmp/bert_tf_gpu_trainer_work",
      help="device: model dirs, logs, the compilation cache (replaced).")
  add("--results", default="", help="compare: the device run's files.")
  add("--dupe_factor", type=int, default=10, help="prepare: masking passes.")
  add("--phases", default=",".join(PHASES), help="device: comma-separated, in order.")
  add("--time_budget_s", type=int, default=420)
  add("--device", default="gpu", choices=("gpu", "cpu", "any"),
      help="gpu: JAX must find a GPU; cpu: the dry run.")
  add("--precision", default="bf16", choices=("bf16", "float32"))
  add("--size", default="base", help="train: the encoder size.")
  add("--batch_size", type=int, default=64)
  add("--train_steps", type=int, default=200)
  add("--steps_per_loop", type=int, default=10,
      help="Also the summary interval: one loss per loop.")
  add("--checkpoint_interval", type=int, default=50)
  add("--kill_after", type=int, default=100, help="SIGKILL once this step's checkpoint exists.")
  add("--numerics_size", default="mini",
      help="steps: the encoder size (its float32 reference steps run on the CPU).")
  add("--numerics_batch_size", type=int, default=16)
  add("--numerics_steps", type=int, default=100)
  add("--kernel_batch_size", type=int, default=8)
  add("--export_size", default="tiny")
  add("--export_steps", type=int, default=100)
  return parser


def checkout_environment(**updates) -> dict:
  """This process's environment with the checkout first on PYTHONPATH (tools/*.py run
  as scripts import bert_tf from it), and `updates`."""
  path = os.pathsep.join(p for p in (common.REPO_ROOT, os.environ.get("PYTHONPATH")) if p)
  return dict(os.environ, PYTHONPATH=path, **updates)


def _run(argv, log_path, timeout, env=None):
  """Runs argv from the repo root (in `env`, default checkout_environment()), stdout and
  stderr to log_path; returns its stdout.

  Raises:
    RuntimeError: argv exited with an error, naming log_path.
  """
  with open(log_path, "a") as log:
    done = subprocess.run(argv, cwd=common.REPO_ROOT, env=env or checkout_environment(),
                          stdout=subprocess.PIPE, stderr=log, text=True, timeout=timeout,
                          check=False)
    log.write(done.stdout)
  if done.returncode:
    raise RuntimeError(f"{' '.join(argv[:3])} ... exited {done.returncode}; see {log_path}")
  return done.stdout


def prepare(args) -> None:
  """The records the device run trains on, made here with the project's tools."""
  from bert_tf.data.creation import corpus  # pylint: disable=g-import-not-at-top
  data = os.path.join(common.REPO_ROOT, args.data_dir)
  os.makedirs(data, exist_ok=True)
  log = os.path.join(data, "prepare.log")
  text = os.path.join(data, "corpus.txt")
  stats = corpus.write_embedded_corpus(text)
  vocab = os.path.join(data, "vocab.txt")
  tools = os.path.join(common.REPO_ROOT, "tools")
  _run([sys.executable, os.path.join(tools, "build_vocab.py"), f"--input={text}",
        f"--output={vocab}", "--vocab_size=4000", "--lower_case", "--overwrite"], log, 600)
  _run([sys.executable, os.path.join(tools, "create_pretraining_data.py"),
        f"--input_file={text}", f"--vocab_file={vocab}",
        f"--output={os.path.join(data, 'pretrain')}", "--seq_length=128",
        "--max_predictions_per_seq=20", f"--dupe_factor={args.dupe_factor}",
        "--overwrite", "--noprogress"], log, 600)
  with open(os.path.join(data, "pretrain.json")) as f:
    summary = json.load(f)
  megabytes = sum(os.path.getsize(p) for p in glob.glob(os.path.join(data, "*"))) / 2**20
  tokens = len(vocab_lib.load_vocab(vocab))
  print(f"{data}: {stats.documents} documents, vocab of {tokens} tokens, "
        f"{summary.get('instances', '?')} instances; {megabytes:.1f} MiB in all", flush=True)


class DeviceRun:
  """The device stage: phases in order within the budget, one JSON line each."""

  def __init__(self, args):
    self.args = args
    self.deadline = time.monotonic() + args.time_budget_s
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(os.path.join(args.work_dir, "logs"))
    os.makedirs(args.out, exist_ok=True)
    self.output = os.path.join(args.out, "trainer.jsonl")
    open(self.output, "w").close()
    gpu_worker.select_device(args.device)
    self.env = checkout_environment(
        PYTHONUNBUFFERED="1", KERAS_BACKEND="jax",
        JAX_COMPILATION_CACHE_DIR=os.path.join(args.work_dir, "jax_cache"))
    self.data = os.path.join(args.data_dir, "pretrain-*.tfrecord")
    self.vocab = os.path.join(args.data_dir, "vocab.txt")

  def left(self) -> float:
    return self.deadline - time.monotonic()

  def record(self, entry: dict) -> None:
    with open(self.output, "a") as f:
      f.write(json.dumps(entry, sort_keys=True) + "\n")
    shown = {k: v for k, v in entry.items() if not isinstance(v, (list, dict))}
    print(json.dumps(shown, sort_keys=True), flush=True)

  def log(self, name: str) -> str:
    return os.path.join(self.args.work_dir, "logs", f"{name}.log")

  def worker(self, name: str, module: str, argv, env=None) -> dict:
    """A worker's RESULT payload (bench/gpu_worker.py)."""
    stdout = _run([sys.executable, "-m", module, *argv], self.log(name),
                  max(1, int(self.left())), env or self.env)
    result = protocol.last_payload(stdout, "RESULT")
    if result is None:
      raise RuntimeError(f"{module} printed no RESULT; see {self.log(name)}")
    return result

  # ----- tools/train.py -----
  def train_command(self, model_dir, size, steps, overrides=()):
    args = self.args
    settings = [
        f"train_data.input_path={self.data}", f"train_data.global_batch_size={args.batch_size}",
        "train_data.seq_length=128", "train_data.max_predictions_per_seq=20",
        f"tokenizer.vocab_file={self.vocab}", "tokenizer.allow_smaller_vocab=true",
        f"optimizer.warmup_steps={max(1, steps // 10)}", f"trainer.train_steps={steps}",
        f"trainer.steps_per_loop={args.steps_per_loop}",
        f"trainer.summary_interval={args.steps_per_loop}",
        f"trainer.log_interval={args.steps_per_loop}",
        f"trainer.checkpoint_interval={args.checkpoint_interval}", "trainer.max_to_keep=2",
        *overrides]
    precision = "mixed_bfloat16" if args.precision == "bf16" else "float32"
    return [sys.executable, os.path.join("tools", "train.py"), "--backend=jax",
            f"--experiment=pretraining_bert_{size}", f"--model_dir={model_dir}",
            f"--mixed_precision_dtype={precision}", "--params_override=" + ",".join(settings)]

  def train(self, name, model_dir, env, size=None, steps=None, overrides=()) -> float:
    """Runs tools/train.py to the end; returns its seconds."""
    start = time.monotonic()
    _run(self.train_command(model_dir, size or self.args.size,
                            steps or self.args.train_steps, overrides),
         self.log(name), max(1, int(self.left())), env)
    return time.monotonic() - start

  def train_killed(self, name, model_dir, env) -> int:
    """Starts tools/train.py and SIGKILLs it once ckpt-{kill_after}.h5 is written;
    returns the step of its last progress line."""
    marker = os.path.join(model_dir, f"ckpt-{self.args.kill_after}.h5")
    with open(self.log(name), "w") as log:
      process = subprocess.Popen(self.train_command(model_dir, self.args.size,
                                                    self.args.train_steps),
                                 cwd=common.REPO_ROOT, env=env, stdout=log, stderr=log)
      while not os.path.exists(marker):
        if process.poll() is not None or self.left() < 0:
          process.kill()
          raise RuntimeError(f"no {marker} before the run ended; see {self.log(name)}")
        time.sleep(0.05)
      process.send_signal(signal.SIGKILL)
      process.wait()
    # The resumed run's summaries start afresh; the killed run's stay beside them.
    os.rename(os.path.join(model_dir, "train"), os.path.join(model_dir, "train_killed"))
    with open(self.log(name), errors="replace") as f:
      logged = [int(m.group(1)) for m in map(re.compile(r"^step (\d+)/").match, f) if m]
    return max(logged, default=0)

  def kill_and_resume(self, label: str, env) -> dict:
    """The uninterrupted run and the killed-and-resumed one; the losses after the resume
    and the last checkpoints compared."""
    from bert_tf.training import summaries  # pylint: disable=g-import-not-at-top
    work = self.args.work_dir
    whole, killed = os.path.join(work, f"{label}_whole"), os.path.join(work, f"{label}_killed")
    whole_s = self.train(f"{label}_whole", whole, env)
    killed_at = self.train_killed(f"{label}_killed", killed, env)
    resumed_s = self.train(f"{label}_resumed", killed, env)
    with open(self.log(f"{label}_resumed")) as f:
      resumed_line = next((l.strip() for l in f if l.startswith("Resumed from")), "")
    a = dict(summaries.read_scalars(os.path.join(whole, "train"))["loss"])
    b = dict(summaries.read_scalars(os.path.join(killed, "train"))["loss"])
    steps = sorted(set(a) & set(b))
    relative = [abs(a[s] - b[s]) / abs(a[s]) for s in steps]
    last = f"ckpt-{self.args.train_steps}.h5"
    arrays = checkpoint_difference(os.path.join(whole, last), os.path.join(killed, last))
    return {"resumed": resumed_line, "killed_after_step": killed_at, "whole_s": whole_s,
            "resumed_s": resumed_s,
            "steps": steps, "whole_losses": [a[s] for s in steps],
            "resumed_losses": [b[s] for s in steps],
            "max_relative_difference": max(relative) if relative else None,
            "losses_bit_equal": all(a[s] == b[s] for s in steps), **arrays}

  # ----- phases -----
  def phase_kernels(self) -> dict:
    return self.worker("kernels", "bench.gpu_worker", [
        "--check=kernels", f"--batch_size={self.args.kernel_batch_size}"])

  def phase_train(self) -> dict:
    result = self.kill_and_resume("train", self.env)
    result["ok"] = bool(result["steps"]) and result["max_relative_difference"] <= RESUME_TOLERANCE
    result["tolerance"] = RESUME_TOLERANCE
    return result

  def phase_deterministic(self) -> dict:
    env = dict(self.env, XLA_FLAGS=" ".join(
        [self.env.get("XLA_FLAGS", ""), DETERMINISTIC_FLAG]).strip())
    result = self.kill_and_resume("deterministic", env)
    result["ok"] = bool(result["steps"]) and result["losses_bit_equal"] and result[
        "arrays_equal"]
    return result

  def phase_throughput(self) -> dict:
    from bert_tf.training import summaries  # pylint: disable=g-import-not-at-top
    args = self.args
    whole = os.path.join(args.work_dir, "train_whole")
    if not os.path.isdir(whole):
      raise RuntimeError("the train phase did not run: no trainer figures to compare")
    trainer = [v for _, v in summaries.read_scalars(os.path.join(whole, "train"))[
        "sequences_per_second"]]
    step = self.worker("bench_step", "bench.gpu_worker", [
        "--side=ours", f"--size={args.size}", f"--batch_size={args.batch_size}",
        "--seq_length=128", "--predictions=20", "--steps=20", "--warmup_steps=3",
        f"--precision={args.precision}", f"--device={args.device}"])
    bench_rate = args.batch_size / statistics.median(step["back_to_back_step_seconds"])
    host = self.worker("input", "bench.gpu_worker", [
        "--check=input", f"--config={os.path.join(whole, 'params.yaml')}", "--steps=200"])
    trainer_rate = statistics.median(trainer)
    return {"trainer_sequences_per_second": trainer_rate, "trainer_windows": trainer,
            "bench_back_to_back_sequences_per_second": bench_rate,
            "bench_synced_sequences_per_second":
                args.batch_size / statistics.median(step["step_seconds"]),
            "bench_first_step_s": step["first_step_s"], "bench_device": step["device"],
            "trainer_over_bench": trainer_rate / bench_rate,
            "input_sequences_per_second": host["sequences_per_second"],
            "input_over_trainer": host["sequences_per_second"] / trainer_rate}

  def phase_export(self) -> dict:
    args = self.args
    model_dir = os.path.join(args.work_dir, "export")
    vocab_size = len(vocab_lib.load_vocab(os.path.join(common.REPO_ROOT, self.vocab)))
    seconds = self.train("export_train", model_dir, self.env, size=args.export_size,
                         steps=args.export_steps,
                         overrides=[f"model.encoder.vocab_size={vocab_size}"])
    checkpoint = os.path.join(model_dir, f"ckpt-{args.export_steps}.h5")
    outputs = self.worker("export_outputs", "bench.gpu_worker", [
        "--check=outputs", f"--checkpoint={checkpoint}",
        f"--config={os.path.join(model_dir, 'params.yaml')}",
        f"--output={os.path.join(args.out, 'gpu_outputs.npz')}"])
    shutil.copy(checkpoint, args.out)
    shutil.copy(os.path.join(model_dir, "params.yaml"), args.out)
    return {"train_s": seconds, "checkpoint": os.path.basename(checkpoint),
            "checkpoint_mib": os.path.getsize(checkpoint) / 2**20, "outputs": outputs}

  def phase_steps(self) -> dict:
    args = self.args
    env = dict(self.env)
    platforms = env.get("JAX_PLATFORMS", "")
    if platforms and "cpu" not in platforms.split(","):
      env["JAX_PLATFORMS"] = platforms + ",cpu"  # the float32 reference runs on the CPU
    return self.worker("steps", "bench.gpu_worker", [
        "--check=steps", f"--size={args.numerics_size}",
        f"--batch_size={args.numerics_batch_size}", f"--steps={args.numerics_steps}"], env)

  def run(self) -> bool:
    ok = True
    for name in self.args.phases.split(","):
      estimate = ESTIMATE_S[name]
      if self.left() < estimate:
        self.record({"phase": name, "status": "skipped", "left_s": self.left(),
                     "estimate_s": estimate})
        continue
      start = time.monotonic()
      try:
        result = getattr(self, f"phase_{name}")()
        status = "ok" if result.get("ok", True) else "out of tolerance"
      except (RuntimeError, subprocess.TimeoutExpired, OSError, KeyError) as e:
        result, status = {"error": f"{type(e).__name__}: {e}"}, "failed"
      ok &= status == "ok"
      self.record({"phase": name, "status": status, "seconds": time.monotonic() - start,
                   "estimate_s": estimate, **result})
    self.collect_logs()
    return ok

  def collect_logs(self) -> None:
    """The end of every process's log, into --out/logs.txt."""
    with open(os.path.join(self.args.out, "logs.txt"), "w") as out:
      for path in sorted(glob.glob(os.path.join(self.args.work_dir, "logs", "*.log"))):
        with open(path, errors="replace") as f:
          tail = f.read().splitlines()[-40:]
        out.write(f"== {os.path.basename(path)}\n" + "\n".join(tail) + "\n")


def checkpoint_difference(a_path: str, b_path: str) -> dict:
  """Whether two portable checkpoints hold equal arrays, and their largest difference."""
  from bert_tf.checkpoints import portable  # pylint: disable=g-import-not-at-top
  a, b = portable.arrays(a_path), portable.arrays(b_path)
  differences = [float(np.max(np.abs(np.asarray(a[k], np.float64) -
                                     np.asarray(b[k], np.float64))))
                 for k in a if k in b and a[k].shape == b[k].shape and a[k].size]
  return {"arrays": len(a), "arrays_equal": a.keys() == b.keys() and all(
      np.array_equal(a[k], b[k]) for k in a),
          "max_array_difference": max(differences) if differences else None}


def compare(args) -> bool:
  """The device's checkpoint exported here and asked the same ids as the GPU model."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import  # registers the text ops
  results = args.results
  checkpoint = sorted(glob.glob(os.path.join(results, "ckpt-*.h5")))[-1]
  export_base = os.path.join(args.work_dir, "export")
  shutil.rmtree(export_base, ignore_errors=True)
  os.makedirs(args.work_dir, exist_ok=True)
  _run([sys.executable, os.path.join(common.REPO_ROOT, "tools", "export_saved_model.py"),
        f"--checkpoint={checkpoint}", f"--config={os.path.join(results, 'params.yaml')}",
        f"--vocab_file={os.path.join(common.REPO_ROOT, args.data_dir, 'vocab.txt')}",
        f"--export_dir={export_base}", "--kind=encoder", "--version=1"],
       os.path.join(args.work_dir, "export.log"), 600)
  gpu = np.load(os.path.join(results, "gpu_outputs.npz"))
  served = tf.saved_model.load(os.path.join(export_base, "1")).signatures["serve_token_ids"](
      **{k: tf.constant(gpu[k]) for k in ("input_word_ids", "input_mask", "input_type_ids")})
  names = ("sequence_output", "pooled_output")
  report = dict(zip(names, gpu_worker.relative_errors(
      [served[name].numpy() for name in names], [gpu[name] for name in names])))
  ok = max(report.values()) <= EXPORT_TOLERANCE
  print(json.dumps({"checkpoint": checkpoint, "max_relative_error": report,
                    "tolerance": EXPORT_TOLERANCE, "ok": ok}), flush=True)
  return ok


def main(argv=None) -> int:
  args = argument_parser().parse_args(argv)
  unknown = set(args.phases.split(",")) - set(PHASES)
  if unknown:
    print(f"gpu_trainer: error: --phases: unknown {sorted(unknown)}; known: {PHASES}",
          file=sys.stderr)
    return 2
  if args.stage == "prepare":
    prepare(args)
    return 0
  if args.stage == "compare":
    return 0 if compare(args) else 1
  return 0 if DeviceRun(args).run() else 1


if __name__ == "__main__":
  sys.exit(main())
