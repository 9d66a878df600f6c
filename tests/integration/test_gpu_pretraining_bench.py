"""bench/gpu_pretraining.py at tiny size on the CPU: both sides and a float8 variant of
ours train and are timed synced and back to back, the run's JSON lines carry positive
sequences/s and an MFU for each within 100% of the matmul rate the run measured (whose
device names the CPU's instruction sets), and each profile's device time by category,
every figure is printed with the command that reproduces it, and no process of the run
tries to import TensorFlow (the GPU machines it is written for have none)."""

import json
import math
import os
import subprocess
import sys

import pytest

from bench import flops as flops_module
from bench import matmul_peak
import bench_helpers
from bert_tf import configs
import paths

ROOT = paths.ROOT
# Only its functions are used here (bench_helpers drops its absl flags).
gpu_pretraining = bench_helpers.import_without_flags("gpu_pretraining")


def test_tiny_run_on_cpu_times_and_profiles_both_sides_and_a_variant_without_tensorflow(
    tmp_path):
  (tmp_path / "sitecustomize.py").write_text(bench_helpers.NO_TENSORFLOW_SITECUSTOMIZE)
  import_log = tmp_path / "tensorflow_imports.txt"
  output = tmp_path / "run.jsonl"
  # One OpenMP thread for torch: its threads spin while they wait, and on a busy
  # 2-core machine two of them made a tiny step ten times slower than one.
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]),
             TF_IMPORT_LOG=str(import_log), KERAS_BACKEND="jax", OMP_NUM_THREADS="1",
             XLA_FLAGS="--xla_force_host_platform_device_count=1")
  done = subprocess.run(
      [sys.executable, "-m", "bench.gpu_pretraining", "--sizes=tiny",
       "--seqs=128", "--batch_sizes=128:4", "--sides=ours,hf_eager", "--steps=2",
       "--warmup_steps=1", "--back_to_back_rounds=2", "--precision=float32",
       "--device=cpu", "--matmul_shapes=256x256x256", "--timeout_s=400", "--profile",
       "--profile_steps=2", f"--profile_dir={tmp_path / 'profiles'}",
       "--variant=fp8=runtime.float8_training=true;env:BENCH_TEST=1;"
       "xla:--xla_cpu_enable_fast_math=false",
       f"--output={output}", f"--worker_logs={tmp_path / 'logs'}"],
      cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  assert not import_log.exists(), import_log.read_text()[-3000:]

  records = [json.loads(line) for line in output.read_text().splitlines()]
  matmul = [r for r in records if r["record"] == "matmul"]
  assert [r["side"] for r in matmul] == ["matmul_jax", "matmul_torch"]
  assert all(r["status"] == "ok" and r["flops_per_second"] > 0 for r in matmul)
  # On a CPU the device names the instruction sets the products ran with.
  assert all(matmul_peak.cpu_isa() in r["device"] for r in matmul)
  steps = {(r["side"], r["variant"]): r for r in records if r["record"] == "step"}
  assert list(steps) == [("ours", ""), ("ours", "fp8"), ("hf_eager", "")]
  flops = gpu_pretraining.model_flops_per_sequence(configs.EncoderConfig.from_size("tiny"),
                                                   128, 20)
  for key, r in steps.items():
    assert r["status"] == "ok", (key, r.get("error"))
    assert (r["seq_length"], r["batch_size"], r["predictions"]) == (128, 4, 20)
    assert len(r["step_seconds"]) == 2 and len(r["back_to_back_step_seconds"]) == 2
    assert r["sequences_per_second"] > 0 and r["back_to_back_sequences_per_second"] > 0
    assert 0 < r["mfu"] <= flops_module.MAX_UTILISATION
    assert 0 < r["back_to_back_mfu"] <= flops_module.MAX_UTILISATION
    assert r["model_flops_per_sequence"] == flops
    assert math.isfinite(r["loss_first"]) and math.isfinite(r["loss_last"])
    assert r["tensorflow_loaded"] is False
    assert r["command"] in done.stdout
    profile = r["profile"]
    assert profile["source"] == "host" and profile["steps"] == 2
    assert profile["device_ms_per_step"] > 0 and len(profile["top_kernels"]) == 10
    assert sum(profile["categories_ms_per_step"].values()) == pytest.approx(
        profile["device_ms_per_step"])
    assert os.path.exists(profile["trace"])
  # The same model on both sides and in the variant: equal parameter counts (float8's
  # scaling state is no parameter).
  assert steps[("ours", "")]["params"] == steps[("hf_eager", "")]["params"] == steps[
      ("ours", "fp8")]["params"]
  # The variant's XLA flag joins the run's; the base keeps the run's own.
  # The JAX engine's defaults (command buffers off) after the run's and variant's flags.
  assert steps[("ours", "fp8")]["xla_flags"] == (
      "--xla_force_host_platform_device_count=1 --xla_cpu_enable_fast_math=false "
      "--xla_gpu_enable_command_buffer=")
  assert steps[("ours", "")]["xla_flags"] == (
      "--xla_force_host_platform_device_count=1 --xla_gpu_enable_command_buffer=")
  assert "--nobase" in steps[("ours", "fp8")]["command"]
  assert "bert_tf (JAX) [fp8]" in done.stdout and "Device time per step" in done.stdout
