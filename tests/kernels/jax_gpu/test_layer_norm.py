"""The JAX speed path's residual LayerNorm (bert_tf.kernels.jax_gpu.layer_norm): the
Pallas kernel in interpret mode against its XLA form, and lowered for CUDA through
Pallas's Triton lowering (no GPU needed). Tolerances: float32 outputs 1e-5 absolute,
gradients 1e-5 relative to their largest value."""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_tf.kernels.jax_gpu import layer_norm as jax_layer_norm
import kernels_helpers

SEED = np.array([1234, 0], np.uint32)


def _layer_norm_inputs(width, dtype):
  rng = np.random.default_rng(2)
  rows = lambda: jnp.asarray(rng.normal(size=(3, 8, width)), dtype)
  x, residual, d_out = rows(), rows(), rows().astype(jnp.float32)
  bias = jnp.asarray(rng.normal(size=(width,)), dtype)
  gamma, beta = (jnp.asarray(rng.normal(size=(width,)), jnp.float32) for _ in range(2))
  return (x, bias, residual, gamma, beta), d_out


def _layer_norm_value_and_grads(function, inputs, d_out, rate):
  def loss(*inputs):
    out = function(*inputs, 1e-12, rate, jnp.asarray(SEED))
    return jnp.sum(out.astype(jnp.float32) * d_out), out
  (_, out), grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3, 4),
                                               has_aux=True))(*inputs)
  return [np.asarray(t, np.float32) for t in (out, *grads)]


def test_xla_residual_layer_norm_is_layer_norm_of_the_residual_plus_x_plus_bias():
  (x, bias, residual, gamma, beta), _ = _layer_norm_inputs(32, jnp.float32)
  total = np.asarray(residual) + np.asarray(x) + np.asarray(bias)
  mean, var = total.mean(-1, keepdims=True), total.var(-1, keepdims=True)
  expected = (total - mean) / np.sqrt(var + 1e-12) * np.asarray(gamma) + np.asarray(beta)
  np.testing.assert_allclose(jax_layer_norm.xla_residual_layer_norm(
      x, bias, residual, gamma, beta, 1e-12), expected, atol=1e-5)


@pytest.mark.parametrize("width", [32, 24])  # 24: columns padded to 32 and masked
@pytest.mark.parametrize("rate", [0.0, 0.1])
def test_the_fused_layer_norm_equals_its_xla_form_in_value_and_gradients(width, rate):
  inputs, d_out = _layer_norm_inputs(width, jnp.float32)
  fused = _layer_norm_value_and_grads(
      functools.partial(jax_layer_norm.residual_layer_norm, interpret=True), inputs, d_out,
      rate)
  plain = _layer_norm_value_and_grads(jax_layer_norm.xla_residual_layer_norm, inputs,
                                      d_out, rate)
  for a, b in zip(fused, plain):
    np.testing.assert_allclose(a, b, atol=1e-5 * max(1.0, np.abs(b).max()))


@pytest.mark.parametrize("width", [768, 1024])
def test_the_layer_norm_kernels_lower_to_triton_for_cuda(width):
  rows = jax.ShapeDtypeStruct((64, 128, width), jnp.bfloat16)
  vector = jax.ShapeDtypeStruct((width,), jnp.float32)

  def value_and_grads(x, bias, residual, gamma, beta, seed):
    loss = lambda *a: jnp.sum(jax_layer_norm.residual_layer_norm(
        *a, 1e-12, 0.1, seed).astype(jnp.float32))
    return jax.value_and_grad(loss, argnums=(0, 1, 2, 3, 4))(x, bias, residual, gamma, beta)

  text = kernels_helpers.lowered_for_cuda(value_and_grads, rows, vector, rows, vector, vector,
                           jax.ShapeDtypeStruct((2,), jnp.uint32))
  assert re.findall(r'name = "(\w+)"', text) == [
      "_layer_norm_forward_kernel", "_layer_norm_backward_kernel"]
