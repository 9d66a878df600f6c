"""The GPU benchmark's arithmetic, report and variants, without timing anything: model
FLOPs per sequence (bert_tf.utils.model_flops, shared by the CPU and GPU pretraining
benchmarks)
against the formula worked by hand; the tables of several runs (bench/gpu_pretraining.py),
where a later run fills the configurations an earlier one skipped, variants compare with
the base configuration and profiled rows show where the time went; and the --variant
settings (bench/gpu_pretraining.py)."""

import pytest

from bench import flops
import bench_helpers
from bert_tf import configs
from bert_tf.utils import model_flops

gpu_pretraining = bench_helpers.import_without_flags("gpu_pretraining")
pretraining_step = bench_helpers.import_without_flags("pretraining_step")

# 3 x [L T (8H^2 + 4HI) + 4 L T^2 H + P (2H^2 + 2HV) + 2H^2], worked by hand for
# L 12, H 768, I 3072, V 30522, T 128, P 20: 3 x 23,309,660,160.
BERT_BASE_SEQ_128_P_20 = 69_928_980_480


def test_model_flops_of_bert_base_at_seq_128_follow_the_formula():
  assert model_flops.pretraining_flops_per_sequence(12, 768, 3072, 30522, 128, 20) == (
      BERT_BASE_SEQ_128_P_20)


def test_cpu_and_gpu_benchmarks_count_the_same_flops():
  gpu = gpu_pretraining.model_flops_per_sequence(configs.EncoderConfig.from_size("base"),
                                                 128, 20)
  cpu = pretraining_step.model_flops_per_sequence("base", 128, 20)
  assert gpu == cpu == BERT_BASE_SEQ_128_P_20


def _step(date, side, status, seq_per_s, variant="", back_to_back=None, profile=None):
  step = {"record": "step", "size": "base", "seq_length": 128, "batch_size": 64,
          "predictions": 20, "side": side, "system": gpu_pretraining.SYSTEMS[side],
          "status": status, "command": f"measure {side} ({date})", "device": "gpu0"}
  if variant:
    step["variant"] = variant
  if status == "ok":
    step.update(median_step_ms=64e3 / seq_per_s, q1_step_ms=1.0, q3_step_ms=2.0,
                min_step_ms=1.0, max_step_ms=3.0, sequences_per_second=seq_per_s,
                mfu=0.25, first_step_s=30.0, peak_memory_mb=1000.0)
    if back_to_back:
      step.update(back_to_back_step_ms=64e3 / back_to_back,
                  back_to_back_sequences_per_second=back_to_back, back_to_back_mfu=0.5)
    if profile:
      step["profile"] = profile
  else:
    step["error"] = "out of --time_budget_s"
  return step


def _run(date, command, steps, rate=1e15):
  records = [{"record": "run", "date": date, "command": command, "precision": "bf16",
              "hf_mlm": "gathered", "matmul_flops_per_second": rate},
             {"record": "matmul", "status": "ok", "framework": "jax 0", "device": "gpu0",
              "flops_per_second": rate}]
  return records + [_step(date, *step) for step in steps]


def _rows(table):
  return [line for line in table.splitlines() if line.startswith("| base")]


def test_a_later_run_fills_what_an_earlier_run_skipped():
  first = _run("day 1", "first", [("ours", "ok", 1000.0), ("hf_eager", "ok", 2000.0),
                                  ("hf_compile", "skipped", 0.0)])
  second = _run("day 2", "second", [("hf_compile", "ok", 4000.0)])
  table = gpu_pretraining.report([first, second])
  rows = _rows(table)
  assert [row.split(" | ")[2] for row in rows] == [
      "bert_tf (JAX)", "HF torch eager", "HF torch.compile"]
  assert "skipped" not in table
  # ours 1,000 seq/s over the second run's 4,000; neither measured back to back.
  assert rows[2].endswith("| 0.25x |  |")
  assert "measure hf_compile (day 2)" in table
  assert "Run of day 1 (2 rows): `first`" in table
  assert "Run of day 2 (1 row): `second`" in table


def test_each_side_against_its_framework_and_no_mfu_above_100_percent_printed():
  records = _run("day 1", "run", [("ours", "ok", 1000.0), ("hf_eager", "ok", 2000.0)],
                 rate={"jax": 1e15, "torch": 9e14})
  records[1]["flops_per_second"] = 1e15  # the jax matmul record
  records[-1]["mfu"] = 1.3  # a rate measured too low: the table says so, not 130%
  table = gpu_pretraining.report([records])
  rows = [row.split(" | ") for row in _rows(table)]
  assert [row[7] for row in rows] == ["25.0%", flops.SUSPECT]
  assert "130" not in table
  assert "each side against its own framework's" in table
  old = gpu_pretraining.report([_run("day 0", "old", [("ours", "ok", 1000.0)])])
  assert "best median over shapes; used: 1000.00 TFLOP/s" in old


def test_a_later_skip_keeps_the_earlier_figure():
  first = _run("day 1", "first", [("ours", "ok", 1000.0)])
  second = _run("day 2", "second", [("ours", "skipped", 0.0)])
  steps = gpu_pretraining.merge_steps([first, second])
  assert [(s["status"], s["command"]) for s in steps] == [("ok", "measure ours (day 1)")]


def test_variants_are_rows_of_their_own_compared_with_the_base_configuration():
  records = _run("day 1", "run", [("ours", "ok", 500.0, "", 1000.0),
                                  ("ours", "ok", 800.0, "fp8", 1250.0),
                                  ("hf_compile", "ok", 1000.0, "", 2000.0)])
  rows = [row.split(" | ") for row in _rows(gpu_pretraining.report([records]))]
  assert [row[2] for row in rows] == ["bert_tf (JAX)", "bert_tf (JAX) [fp8]",
                                      "HF torch.compile"]
  # synced seq/s, back-to-back seq/s, MFU synced and back to back.
  assert rows[0][5:9] == ["500.0", "1,000.0", "25.0%", "50.0%"]
  assert [row[-2:] for row in rows] == [["", " |"], ["0.62x", "0.80x |"],
                                        ["0.50x", "0.50x |"]]


PROFILE = {"source": "gpu", "steps": 3, "device_ms_per_step": 50.0,
           "kernels_per_step": 1500.0, "wall_ms_per_step": 56.0,
           "categories_ms_per_step": {"gemm": 25.0, "attention": 10.0,
                                      "scatter_gather": 0.1, "copy_transpose": 4.9,
                                      "optimizer": 3.0, "other": 7.0},
           "top_kernels": [{"name": "sm90_xmma_gemm_bf16", "category": "gemm",
                            "ms_per_step": 5.0, "calls_per_step": 48.0}]}


def test_profiled_rows_show_device_time_by_category_and_their_largest_kernels():
  records = _run("day 1", "run", [("ours", "ok", 500.0), ("hf_compile", "ok", 1000.0,
                                                          "", 1100.0, PROFILE)])
  table = gpu_pretraining.report([records])
  section = table[table.index("Device time per step"):]
  rows = [line for line in section.splitlines() if line.startswith("| base")]
  assert len(rows) == 1
  assert rows[0].split(" | ")[2:6] == ["HF torch.compile", "50.00", "25.00 (50%)",
                                       "10.00 (20%)"]
  assert rows[0].endswith("| 1,500 | 56.0 |")
  assert ("- base 128 x 64, HF torch.compile (gpu): `sm90_xmma_gemm_bf16` 5.00 ms x48 "
          "(GEMM)") in section
  assert "Device time" not in gpu_pretraining.report([_run("d", "r", [("ours", "ok", 5.0)])])


def test_variant_settings_are_config_overrides_environment_and_xla_flags():
  variant = gpu_pretraining.parse_variant(
      "fast=runtime.float8_training=true; model.encoder.dropout_rate=0;"
      "env:JAX_DEFAULT_PRNG_IMPL=rbg;xla:--xla_gpu_enable_command_buffer=;xla:--a=1,2")
  assert variant.name == "fast"
  assert variant.overrides == ("runtime.float8_training=true", "model.encoder.dropout_rate=0")
  assert variant.runtime_overrides() == ["runtime.float8_training=true"]
  env = variant.environment({"XLA_FLAGS": "--xla_dump_to=/tmp/x", "HOME": "/root"})
  assert env == {"XLA_FLAGS": "--xla_dump_to=/tmp/x --xla_gpu_enable_command_buffer= --a=1,2",
                 "JAX_DEFAULT_PRNG_IMPL": "rbg", "HOME": "/root"}
  assert gpu_pretraining.Variant().environment({"A": "1"}) == {"A": "1"}


@pytest.mark.parametrize("specs, error", [
    (["fp8"], "expected NAME=SETTING"),
    (["base=runtime.float8_training=true"], "not 'base'"),
    (["a b=runtime.float8_training=true"], "expected NAME=SETTING"),
    (["x=dropout"], "is no key.sub=value"),
    (["x=runtime.float8_trainng=true"], "float8_training"),
    (["x=xla:--a", "x=xla:--b"], "names repeat"),
])
def test_malformed_variants_fail_before_anything_runs(specs, error):
  with pytest.raises(ValueError, match=error):
    gpu_pretraining.parse_variants(specs)
