"""The JAX training step scatters no gradient into a small table: a scatter-add that lands
many updates on few rows serializes on a GPU (atomic adds onto the same addresses; the
token-type gradient, B x T rows into 2, took 39% of a BERT-large step on an H100).

The step is lowered (not run) in a subprocess with KERAS_BACKEND=jax
(tests/kernels/jax_step_hlo_main.py) and its StableHLO scatter-adds are read. Allowed:
the gradients of gathers into large tables, which land under one update per row on
average (the word embeddings; the masked positions' rows of the [B, T, H] sequence).

The step with the JAX GPU speed path (Pallas attention and LayerNorms) is also lowered
for CUDA (no GPU needed: Pallas's Triton lowering runs here): its kernels are in it."""

import collections
import functools
import json
import os
import subprocess
import sys

import pytest

import paths

# Updates per row of a scatter-add's operand, on average, at and above which it fails.
MAX_UPDATES_PER_ROW = 8
_MAIN = os.path.join(paths.TESTS_DIR, "kernels", "jax_step_hlo_main.py")


@functools.lru_cache(maxsize=None)
def _lowered(kernels: str):
  env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=paths.ROOT)
  result = subprocess.run([sys.executable, _MAIN, kernels], env=env, capture_output=True,
                          text=True, timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-4000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # lowers the whole jitted step in a process
@pytest.mark.parametrize("kernels", ["reference", "jax_gpu_cuda"])
def test_the_jax_training_step_scatters_no_gradient_into_a_small_table(kernels):
  scatters = _lowered(kernels)["scatter_adds"]
  # The parser sees the scatters that must be there: the word table's gradient (100
  # rows) and the masked positions' (B*T = 64 rows in all: a [B, T, H] operand, the
  # batch a batching dimension of the gather, layers/gather.py), or the check would pass
  # vacuously.
  rows_in_all = {s["rows"] * (s["operand"][0] if len(s["operand"]) == 3 else 1)
                 for s in scatters}
  assert {100, 64} <= rows_in_all, scatters
  crowded = [s for s in scatters if s["updates"] >= MAX_UPDATES_PER_ROW * s["rows"]]
  assert not crowded, f"scatter-adds of >= {MAX_UPDATES_PER_ROW} updates per row: {crowded}"


def test_the_jax_gpu_step_lowers_for_cuda_with_its_kernels():
  kernels = collections.Counter(_lowered("jax_gpu_cuda")["kernels"])
  # Attention in every block but the last, which runs at 1 + 4 query positions (XLA
  # ops); both LayerNorms of every block (2 blocks).
  assert kernels == {"_attention_forward_kernel": 1, "_attention_key_value_kernel": 1,
                     "_attention_query_kernel": 1, "_layer_norm_forward_kernel": 4,
                     "_layer_norm_backward_kernel": 4}
