"""Switching a built model's speed path, for tests that compare both paths on one model;
lowering a JAX function for CUDA, and running a JAX check script, for the GPU kernels'
tests."""

import contextlib
import json
import os
import subprocess
import sys

import paths


@contextlib.contextmanager
def kernels_of(model, kernels):
  """Within the block, every layer of `model` that takes a speed path (bert_tf.kernels)
  uses `kernels`; afterwards each has its own again. Only calls traced inside the block
  see the change."""
  layers = [layer for layer in model._flatten_layers()  # pylint: disable=protected-access
            if hasattr(layer, "kernels")]
  before = [layer.kernels for layer in layers]
  for layer in layers:
    layer.kernels = kernels
  try:
    yield
  finally:
    for layer, previous in zip(layers, before):
      layer.kernels = previous


def lowered_for_cuda(function, *shapes):
  """The StableHLO text of jax.jit(function) lowered for CUDA, Pallas kernels included
  (Pallas's Triton lowering runs without a GPU); shapes as jax.ShapeDtypeStruct."""
  import jax  # pylint: disable=g-import-not-at-top
  from jax import export  # pylint: disable=g-import-not-at-top
  triton = export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")
  return export.export(jax.jit(function), platforms=["cuda"],
                       disabled_checks=[triton])(*shapes).mlir_module()


def jax_script_figures(script: str, **env) -> dict:
  """The JSON line a check script of tests/kernels/jax_gpu/ prints last, run in a
  process of its own with KERAS_BACKEND=jax on CPUs (this process runs Keras on
  TensorFlow), `env` added to its environment."""
  env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=paths.ROOT,
             **env)
  result = subprocess.run(
      [sys.executable, os.path.join(paths.TESTS_DIR, "kernels", "jax_gpu", script)],
      env=env, capture_output=True, text=True, timeout=900, check=False)
  assert result.returncode == 0, result.stderr[-4000:]
  return json.loads(result.stdout.strip().splitlines()[-1])
