"""The GPU benchmark's arithmetic and report, without timing anything: model FLOPs per
sequence (bench/flops.py, shared by the CPU and GPU pretraining benchmarks) against the
formula worked by hand, and the table of several runs, where a later run fills the
configurations an earlier one skipped."""

import importlib
import sys

from absl import flags
import paths

sys.path.insert(0, paths.BENCH_DIR)

import flops  # pylint: disable=g-import-not-at-top,wrong-import-position


def _import_without_flags(name):
  """Imports a benchmark script for its functions, then drops the absl flags it defined:
  the two scripts share flag names (--output, ...), as do the tools other tests of this
  process import."""
  before = set(flags.FLAGS)
  module = importlib.import_module(name)
  for flag in set(flags.FLAGS) - before:
    delattr(flags.FLAGS, flag)
  return module


gpu_pretraining = _import_without_flags("gpu_pretraining")
pretraining_step = _import_without_flags("pretraining_step")

from bert_tf import configs  # pylint: disable=g-import-not-at-top,wrong-import-position

# 3 x [L T (8H^2 + 4HI) + 4 L T^2 H + P (2H^2 + 2HV) + 2H^2], worked by hand for
# L 12, H 768, I 3072, V 30522, T 128, P 20: 3 x 23,309,660,160.
BERT_BASE_SEQ_128_P_20 = 69_928_980_480


def test_model_flops_of_bert_base_at_seq_128_follow_the_formula():
  assert flops.pretraining_flops_per_sequence(12, 768, 3072, 30522, 128, 20) == (
      BERT_BASE_SEQ_128_P_20)


def test_cpu_and_gpu_benchmarks_count_the_same_flops():
  gpu = gpu_pretraining.model_flops_per_sequence(configs.EncoderConfig.from_size("base"),
                                                 128, 20)
  cpu = pretraining_step.model_flops_per_sequence("base", 128, 20)
  assert gpu == cpu == BERT_BASE_SEQ_128_P_20


def _run(date, command, steps, rate=1e15):
  records = [{"record": "run", "date": date, "command": command, "precision": "bf16",
              "hf_mlm": "gathered", "matmul_flops_per_second": rate},
             {"record": "matmul", "status": "ok", "framework": "jax 0", "device": "gpu0",
              "flops_per_second": rate}]
  for side, status, seq_per_s in steps:
    step = {"record": "step", "size": "base", "seq_length": 128, "batch_size": 64,
            "predictions": 20, "side": side, "system": gpu_pretraining.SYSTEMS[side],
            "status": status, "command": f"measure {side} ({date})", "device": "gpu0"}
    if status == "ok":
      step.update(median_step_ms=64e3 / seq_per_s, q1_step_ms=1.0, q3_step_ms=2.0,
                  min_step_ms=1.0, max_step_ms=3.0, sequences_per_second=seq_per_s,
                  mfu=0.25, first_step_s=30.0, peak_memory_mb=1000.0)
    else:
      step["error"] = "out of --time_budget_s"
    records.append(step)
  return records


def test_a_later_run_fills_what_an_earlier_run_skipped():
  first = _run("day 1", "first", [("ours", "ok", 1000.0), ("hf_eager", "ok", 2000.0),
                                  ("hf_compile", "skipped", 0.0)])
  second = _run("day 2", "second", [("hf_compile", "ok", 4000.0)])
  table = gpu_pretraining.report([first, second])
  rows = [line for line in table.splitlines() if line.startswith("| base")]
  assert [row.split(" | ")[2] for row in rows] == [
      "bert_tf (JAX)", "HF torch eager", "HF torch.compile"]
  assert "skipped" not in table
  assert rows[2].endswith("| 0.25x |")  # ours 1,000 seq/s over the second run's 4,000
  assert "measure hf_compile (day 2)" in table
  assert "Run of day 1 (2 rows): `first`" in table
  assert "Run of day 2 (1 row): `second`" in table


def test_a_later_skip_keeps_the_earlier_figure():
  first = _run("day 1", "first", [("ours", "ok", 1000.0)])
  second = _run("day 2", "second", [("ours", "skipped", 0.0)])
  steps = gpu_pretraining.merge_steps([first, second])
  assert [(s["status"], s["command"]) for s in steps] == [("ok", "measure ours (day 1)")]
