"""The utilisation figures of bench/: the instruction sets named beside them
(bench/matmul_peak.py), the guard that no table prints a utilisation above 100%
(bench/flops.py), each pretraining system paired with the product of its framework and
precision (bench/pretraining_step.py), and a tiny inference run whose every reported
MFU, measured against the product timed in its own rounds, is at most 100%."""

from bench import flops
from bench import matmul_peak
import bench_helpers

inference = bench_helpers.import_without_flags("inference")
pretraining_step = bench_helpers.import_without_flags("pretraining_step")


def test_isa_names_vector_width_then_bf16_and_int8_instructions():
  assert matmul_peak.cpu_isa({"fma", "avx2"}) == "AVX2"
  assert matmul_peak.cpu_isa({"avx2", "avx_vnni"}) == "AVX2, AVX_VNNI"
  assert (matmul_peak.cpu_isa({"avx2", "avx512f", "avx512_bf16", "avx512_vnni"})
          == "AVX-512, AVX512_BF16, AVX512_VNNI")
  assert (matmul_peak.cpu_isa({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_int8",
                               "amx_tile"})
          == "AVX-512, AVX512_BF16, AMX_BF16, AMX_INT8")
  assert matmul_peak.cpu_isa({"fp", "asimd", "bf16", "i8mm"}) == "NEON, BF16, I8MM"


def test_isa_without_cpu_flags_says_it_is_unknown():
  assert matmul_peak.cpu_isa(set()).startswith("ISA unknown (")
  assert matmul_peak.cpu_isa()  # this machine's, from /proc/cpuinfo or its fallback


def test_no_utilisation_above_100_percent_is_printed(capsys):
  assert flops.utilisation_text(0.864) == "86%"
  assert flops.utilisation_text(0.1234, 1) == "12.3%"
  assert flops.utilisation_text(1.0) == "100%"
  assert flops.utilisation_text(None) == "n/a"
  assert flops.utilisation(50e9, None) is None
  assert flops.utilisation(50e9, 0.0) is None
  over = flops.utilisation(260e9, 100e9)
  assert flops.utilisation_text(over) == flops.SUSPECT
  assert "suspect" in flops.SUSPECT and "260%" not in flops.SUSPECT
  assert "above 100%" in capsys.readouterr().err


def test_pretraining_report_cell_refuses_over_100_percent_and_old_rates():
  run = {"matmul": {"matmul_tensorflow_float32": {}}}
  assert pretraining_step.mfu_cell(run, {"utilisation": 0.5}) == "50%"
  assert pretraining_step.mfu_cell(run, {"utilisation": 2.2}) == flops.SUSPECT
  assert pretraining_step.mfu_cell(run, {"utilisation": None}) == "n/a"
  # An entry without products of its own run: its old denominator is not used.
  assert pretraining_step.mfu_cell({"matmul_peak_gflops": 72.8},
                                   {"model_gflops_per_second": 190.0}) == "n/a"


def test_each_pretraining_system_divides_by_its_framework_and_precision():
  ours = ["python", "-m", "bench.ours_pretraining_worker", "--mixed_precision", "float32"]
  assert pretraining_step.matmul_of("ours", ours) == ("tensorflow", "float32")
  assert (pretraining_step.matmul_of("ours_bfloat16",
                                     ours + ["--mixed_precision", "mixed_bfloat16"])
          == ("tensorflow", "bfloat16"))
  float32, bf16 = ["--mixed_precision", "float32"], ["--mixed_precision", "mixed_bfloat16"]
  assert pretraining_step.matmul_of("keras_hub", float32) == ("tensorflow", "float32")
  assert pretraining_step.matmul_of("hf", float32) == ("torch", "float32")
  # The peers' bf16 variants (Keras's mixed_bfloat16 policy, torch's bf16 autocast).
  assert pretraining_step.matmul_of("model_garden", bf16) == ("tensorflow", "bfloat16")
  assert pretraining_step.matmul_of("hf", bf16) == ("torch", "bfloat16")


def test_tiny_inference_reports_utilisation_of_its_own_rounds_at_most_100_percent():
  result = inference.measure("tiny", batch_size=2, seq_length=16, rounds=2,
                             calls_per_round=1, matmul_shape=(256, 128, 256),
                             matmul_seconds=0.02)
  rate = result["matmul"]
  assert rate["framework"].startswith("tensorflow") and rate["dtype"] == "float32"
  assert rate["isa"] == matmul_peak.cpu_isa()
  assert rate["peak_flops_per_second"] >= rate["median_flops_per_second"] > 0
  assert len(result["seconds"][inference.MATMUL]) == 2
  assert set(result["utilisation"]) == {"graph", "xla"}
  for fraction in result["utilisation"].values():
    assert 0 < fraction <= flops.MAX_UTILISATION
  rows = inference.table_rows("tiny", 2, 16, result, rss_mb=1.0)
  mfu = [row[inference.HEADER.index("MFU")] for row in rows]
  assert all(cell.endswith("%") and 0 < float(cell[:-1]) <= 100 for cell in mfu), mfu


def test_tensorflow_int8_rate_is_taken_on_onednns_u8_x_s8_product():
  # The tests run with TensorFlow's oneDNN kernels on (tests/conftest.py), as the tools do.
  one = matmul_peak.product("tensorflow", "int8", (64, 32, 16))
  assert one.framework.endswith("(oneDNN u8 x s8)")
  one.launch()
  one.sync()
