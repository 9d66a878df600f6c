"""Where the GPU benchmark's step time goes (bench/kernel_profile.py): kernel names by
category, the device's events read from jax and torch traces (GPU-like fixtures with
typical kernel names, and CPU traces the profilers write here), and the per-step
summary."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from bench import kernel_profile
import paths


@pytest.mark.parametrize("name, category", [
    # XLA on GPU: fusions named after their root op, cuBLAS/CUTLASS GEMMs, cuDNN attention.
    ("input_scatter_fusion_1", "scatter_gather"),
    ("loop_gather_fusion_3", "scatter_gather"),
    ("cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_nn_align8", "gemm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
     "execute_segment_k_off_kernel__5x_cublas", "gemm"),
    ("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NTN", "gemm"),
    ("triton_gemm_dot_12", "gemm"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_"
     "kernel0_0", "attention"),
    ("loop_transpose_fusion", "copy_transpose"),
    ("input_transpose_fusion_2", "copy_transpose"),
    ("copy_fusion_7", "copy_transpose"),
    ("loop_add_fusion_12", "other"),
    ("input_reduce_fusion_4", "other"),
    # torch.compile (Triton) and eager CUDA kernels.
    ("triton_per_fused_add_native_dropout_native_layer_norm_3", "other"),
    ("triton_tem_fused_addmm_gelu_0", "gemm"),
    ("triton_poi_fused_embedding_dense_backward_5", "scatter_gather"),
    ("pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits>",
     "attention"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous"
     " namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::"
     "FusedAdamMathFunctor<float, 4>>", "optimizer"),
    ("void at::native::(anonymous namespace)::indexing_backward_kernel<c10::BFloat16>",
     "scatter_gather"),
    ("Memcpy DtoD (Device -> Device)", "copy_transpose"),
    ("Memset (Device)", "copy_transpose"),
    # CPU ops: torch's aten and XLA CPU's thunks.
    ("aten::mm", "gemm"), ("aten::addmm", "gemm"), ("aten::bmm", "gemm"),
    ("aten::_fused_adamw_", "optimizer"), ("aten::embedding_dense_backward", "scatter_gather"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention"),
    ("aten::copy_", "copy_transpose"), ("aten::native_layer_norm", "other"),
    ("dot_general.112", "gemm"), ("wrapped_exponential", "other"),
])
def test_kernel_names_fall_in_their_category(name, category):
  assert kernel_profile.categorize(name) == category


def _metadata(pid, process, threads):
  events = [{"ph": "M", "pid": pid, "name": "process_name", "args": {"name": process}}]
  events += [{"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
              "args": {"name": name}} for tid, name in threads.items()]
  return events


def _kernels(pid, tid, kernels, steps, **extra):
  """Complete events: each (name, microseconds) once per step, one after the other."""
  events, ts = [], 0.0
  for _ in range(steps):
    for name, dur in kernels:
      events.append(dict({"ph": "X", "pid": pid, "tid": tid, "ts": ts, "dur": dur,
                          "name": name}, **extra))
      ts += dur + 1.0
  return events


JAX_STEP = [("input_scatter_fusion_1", 35300.0), ("sm90_xmma_gemm_bf16bf16_tn", 9000.0),
            ("cutlass_80_wmma_tensorop_bf16_s161616gemm_nn", 6000.0),
            ("loop_transpose_fusion", 3000.0), ("loop_add_fusion", 500.0),
            ("loop_add_fusion", 500.0), ("MemcpyD2D", 100.0)]


def _jax_gpu_trace(steps=3):
  """A jax.profiler perfetto trace as on a GPU: kernels on a stream line of the device,
  the same time again by HLO op on its derived lines, and host threads."""
  events = _metadata(1, "/device:GPU:0", {1: "Stream #13(Compute)", 2: "XLA Ops",
                                          3: "XLA Modules"})
  events += _metadata(701, "/host:CPU", {10: "python", 11: "tf_XLAPjRtCpuClient/1"})
  events += _kernels(1, 1, JAX_STEP, steps)
  events += _kernels(1, 2, [("fusion.1", 35300.0), ("custom-call.2", 15000.0)], steps)
  events += _kernels(1, 3, [("jit_step(123)", 55000.0)], steps)
  events += _kernels(701, 10, [("PjitFunction(step)", 900.0)], steps)
  events += _kernels(701, 11, [("ThunkExecutor::Execute", 50.0)], steps)
  return {"displayTimeUnit": "ns", "traceEvents": events}


def test_jax_gpu_trace_is_read_from_the_device_streams_only():
  summary = kernel_profile.summarize(_jax_gpu_trace(steps=3), steps=3, top=3)
  assert summary["source"] == "gpu"
  assert summary["kernels_per_step"] == len(JAX_STEP)
  assert summary["device_ms_per_step"] == pytest.approx(54.4)
  assert summary["categories_ms_per_step"] == pytest.approx({
      "gemm": 15.0, "attention": 0.0, "scatter_gather": 35.3, "copy_transpose": 3.1,
      "optimizer": 0.0, "other": 1.0})
  top = summary["top_kernels"]
  assert [k["name"] for k in top] == ["input_scatter_fusion_1", "sm90_xmma_gemm_bf16bf16_tn",
                                      "cutlass_80_wmma_tensorop_bf16_s161616gemm_nn"]
  assert top[0] == {"name": "input_scatter_fusion_1", "category": "scatter_gather",
                    "ms_per_step": pytest.approx(35.3), "calls_per_step": 1.0}


def test_torch_gpu_trace_is_read_from_kernel_and_memory_events(tmp_path):
  events = _metadata(5, "python", {5: "thread 5 (python)"})
  events += _kernels(5, 5, [("aten::mm", 800.0), ("aten::copy_", 50.0)], 2, cat="cpu_op")
  events += _kernels(0, 7, [("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NTN", 400.0),
                            ("triton_per_fused_native_layer_norm_0", 100.0),
                            ("void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor>",
                             300.0)], 2, cat="kernel")
  events += _kernels(0, 7, [("Memcpy HtoD (Pageable -> Device)", 20.0)], 2,
                     cat="gpu_memcpy")
  path = tmp_path / "trace.json"
  path.write_text(json.dumps({"traceEvents": events}))
  summary = kernel_profile.summarize(kernel_profile.read_trace(str(path)), steps=2)
  assert summary["source"] == "gpu"
  assert summary["kernels_per_step"] == 4
  assert summary["categories_ms_per_step"] == pytest.approx({
      "gemm": 0.4, "attention": 0.0, "scatter_gather": 0.0, "copy_transpose": 0.02,
      "optimizer": 0.3, "other": 0.1})


def test_self_times_subtract_what_is_nested_in_each_event_of_a_thread():
  events = [{"pid": 1, "tid": 1, "ts": 0.0, "dur": 10.0, "name": "while.1"},
            {"pid": 1, "tid": 1, "ts": 1.0, "dur": 3.0, "name": "fusion.2"},
            {"pid": 1, "tid": 1, "ts": 5.0, "dur": 4.0, "name": "dot.3"},
            {"pid": 1, "tid": 1, "ts": 5.5, "dur": 1.0, "name": "copy.4"},
            {"pid": 1, "tid": 1, "ts": 12.0, "dur": 2.0, "name": "copy.5"},
            {"pid": 1, "tid": 2, "ts": 1.0, "dur": 1.0, "name": "other_thread.6"}]
  times = {e["name"]: e["dur"] for e in kernel_profile.self_times(events)}
  assert times == {"while.1": 3.0, "fusion.2": 3.0, "dot.3": 3.0, "copy.4": 1.0,
                   "copy.5": 2.0, "other_thread.6": 1.0}
  assert events[0]["dur"] == 10.0  # The input is left as it was.


_CPU_TRACES = textwrap.dedent("""\
    import json, os, sys
    from bench import kernel_profile
    import jax, jax.numpy as jnp, numpy as np, torch
    out = sys.argv[1]
    f = jax.jit(lambda a, b: jnp.tanh(a @ b).T + 1.0)
    a = jnp.ones((128, 128)); b = jnp.ones((128, 128))
    result = []
    step = lambda: result.append(f(a, b)) or result[-1]
    step().block_until_ready()
    jax_path, _ = kernel_profile.capture_jax(step, lambda: result[-1].block_until_ready(), 2,
                                             os.path.join(out, "jax"))
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.GELU(),
                                torch.nn.Linear(32, 4))
    optimizer = torch.optim.AdamW(model.parameters())
    x = torch.randn(8, 32)
    def train():
      loss = model(x).square().mean()
      loss.backward()
      optimizer.step()
      optimizer.zero_grad()
      return loss
    train()
    torch_path, _ = kernel_profile.capture_torch(train, lambda: None, 2,
                                                 os.path.join(out, "torch"), cuda=False)
    print(json.dumps({"jax": jax_path, "torch": torch_path}))
    """)


@pytest.fixture(scope="module")
def cpu_traces(tmp_path_factory):
  """{framework: trace path} of two steps each framework's profiler recorded on the CPU."""
  out = tmp_path_factory.mktemp("traces")
  env = dict(os.environ, JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
  done = subprocess.run([sys.executable, "-c", _CPU_TRACES, str(out)], cwd=paths.ROOT,
                        env=env, capture_output=True, text=True, timeout=300, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("framework", ["jax", "torch"])
def test_cpu_traces_give_the_host_ops_by_category(cpu_traces, framework):
  trace = kernel_profile.read_trace(cpu_traces[framework])
  summary = kernel_profile.summarize(trace, steps=2)
  assert summary["source"] == "host"
  assert summary["device_ms_per_step"] > 0 and summary["kernels_per_step"] >= 1
  assert sum(summary["categories_ms_per_step"].values()) == pytest.approx(
      summary["device_ms_per_step"])
  top = summary["top_kernels"]
  assert [k["ms_per_step"] for k in top] == sorted((k["ms_per_step"] for k in top),
                                                   reverse=True)
  names = {k["name"] for k in top}
  # Runtime scopes and Python frames are not device work.
  assert not any("::" in n and not n.startswith("aten::") or n.startswith("$")
                 for n in names), sorted(names)
  if framework == "torch":
    # Self times: aten::addmm's own, not the aten::linear around it.
    assert summary["categories_ms_per_step"]["gemm"] > 0


def test_table_prints_each_category_and_the_largest_kernels():
  text = kernel_profile.table(kernel_profile.summarize(_jax_gpu_trace(), steps=3, top=2))
  lines = text.splitlines()
  assert lines[0].startswith("gpu time per step 54.40 ms over 7 kernels")
  assert sum(line.strip().startswith(tuple(kernel_profile.LABELS.values()))
             for line in lines[1:]) == len(kernel_profile.CATEGORIES)
  assert "[scatter/gather] input_scatter_fusion_1" in text
