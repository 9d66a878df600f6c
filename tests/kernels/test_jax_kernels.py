"""The JAX speed path's pieces as functions of arrays (no Keras): dropout masks
(bert_tf.kernels.jax_dropout), attention (bert_tf.kernels.jax_attention) and the
residual LayerNorm (bert_tf.kernels.jax_layer_norm), the Pallas kernels in interpret
mode against the same maths as XLA ops, and lowered for CUDA through Pallas's Triton
lowering (no GPU needed). Tolerances: float32 outputs and gradients 1e-5 absolute (LayerNorm
gradients 1e-5 relative to their largest value); bfloat16 2% of the largest value."""

import functools
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_tf.kernels import jax_attention
from bert_tf.kernels import jax_dropout
from bert_tf.kernels import jax_layer_norm

SHAPE = (8, 64, 128)  # 65,536 elements
SEED = np.array([1234, 0], np.uint32)


def _next(seed, steps=1):
  """The seed state `steps` calls later (Keras's SeedGenerator adds [0, 1] per call)."""
  return seed + np.array([0, steps], np.uint32)


@pytest.mark.parametrize("generator", ["hash", "philox"])
@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_masks_drop_at_the_rate(generator, rate):
  keep = np.asarray(jax_dropout.keep_mask(SEED, SHAPE, rate, generator))
  size = keep.size
  # 5 standard deviations of a binomial count.
  assert abs((1 - keep.mean()) - rate) < 5 * math.sqrt(rate * (1 - rate) / size)


@pytest.mark.parametrize("generator", ["hash", "philox"])
def test_masks_are_reproducible_from_the_state_and_new_at_every_step(generator):
  rate, masks = 0.1, []
  for seed in (SEED, _next(SEED), _next(SEED, 2), np.array([1235, 0], np.uint32)):
    masks.append(np.asarray(jax.jit(
        lambda s: jax_dropout.keep_mask(s, SHAPE, rate, generator))(seed)))
  np.testing.assert_array_equal(masks[0], np.asarray(
      jax_dropout.keep_mask(SEED, SHAPE, rate, generator)))
  # Independent masks agree where both keep or both drop: p^2 + (1 - p)^2 of elements.
  independent = rate**2 + (1 - rate)**2
  for other in masks[1:]:
    assert abs((masks[0] == other).mean() - independent) < 0.01


def test_neighbouring_elements_of_a_hash_mask_are_independent():
  rate = 0.5
  keep = np.asarray(jax_dropout.keep_mask(SEED, SHAPE, rate)).reshape(-1)
  for stride in (1, 2, 128, 8192):
    assert abs((keep[:-stride] == keep[stride:]).mean() - 0.5) < 0.01, stride


def test_apply_mask_scales_kept_values_by_the_inverse_keep_probability():
  x = jnp.arange(1.0, 9.0)
  keep = jnp.array([True, False] * 4)
  np.testing.assert_allclose(jax_dropout.apply_mask(x, keep, 0.2),
                             np.where(keep, x / 0.8, 0.0), rtol=1e-6)


def _inputs(queries, length, per_query_bias, dtype=jnp.float32, heads=2, head_size=16):
  rng = np.random.default_rng(0)
  q = rng.normal(size=(2, queries, heads, head_size))
  k, v = (rng.normal(size=(2, length, heads, head_size)) for _ in range(2))
  if per_query_bias:  # packed rows: a block-diagonal pattern, here random
    bias = np.where(rng.random((2, 1, queries, length)) < 0.3, -10000.0, 0.0)
  else:  # padding: the second row's last keys
    bias = np.zeros((2, 1, 1, length))
    bias[1, ..., length * 2 // 3:] = -10000.0
  d_out = rng.normal(size=q.shape)
  return ([jnp.asarray(x, dtype) for x in (q, k, v)], jnp.asarray(bias, jnp.float32),
          jnp.asarray(d_out, jnp.float32))


def _value_and_grads(attend, qkv, bias, d_out, rate):
  def loss(q, k, v):
    out = attend(q, k, v, bias, rate, jnp.asarray(SEED))
    return jnp.sum(out.astype(jnp.float32) * d_out), out
  (_, out), grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True))(*qkv)
  return [np.asarray(x, np.float32) for x in (out, *grads)]


def _flash(*args):
  return jax_attention.flash_attention(*args, interpret=True)


def test_xla_attention_without_dropout_is_softmax_of_scaled_scores_plus_bias_times_v():
  (q, k, v), bias, _ = _inputs(16, 32, per_query_bias=False)
  scores = np.einsum("bqnd,bknd->bnqk", q, k) / math.sqrt(16) + np.asarray(bias)
  probs = np.exp(scores - scores.max(-1, keepdims=True))
  probs /= probs.sum(-1, keepdims=True)
  expected = np.einsum("bnqk,bknd->bqnd", probs, v)
  np.testing.assert_allclose(jax_attention.xla_attention(q, k, v, bias), expected,
                             atol=1e-5)


# Lengths with one block and with several (blocks of 16 to 64 rows).
@pytest.mark.parametrize("queries,length", [(16, 32), (48, 96)])
@pytest.mark.parametrize("per_query_bias", [False, True])
@pytest.mark.parametrize("rate", [0.0, 0.1])
def test_flash_attention_equals_xla_attention_in_value_and_gradients(queries, length,
                                                                     per_query_bias, rate):
  qkv, bias, d_out = _inputs(queries, length, per_query_bias)
  assert jax_attention.flash_supported(qkv[0], qkv[1], bias)
  flash = _value_and_grads(_flash, qkv, bias, d_out, rate)
  plain = _value_and_grads(jax_attention.xla_attention, qkv, bias, d_out, rate)
  for a, b in zip(flash, plain):
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_flash_attention_in_bfloat16_is_within_its_rounding_of_xla():
  qkv, bias, d_out = _inputs(32, 64, False, dtype=jnp.bfloat16, head_size=32)
  flash = _value_and_grads(_flash, qkv, bias, d_out, 0.1)
  plain = _value_and_grads(jax_attention.xla_attention, qkv, bias, d_out, 0.1)
  for a, b in zip(flash, plain):
    np.testing.assert_allclose(a, b, atol=0.02 * np.abs(b).max())


@pytest.mark.parametrize("queries,length,head_size,supported", [
    (128, 128, 64, True), (384, 384, 64, True), (21, 128, 64, False),
    (128, 100, 64, False), (128, 128, 48, False)])
def test_flash_attention_takes_lengths_of_whole_blocks_and_power_of_two_heads(
    queries, length, head_size, supported):
  q = jax.ShapeDtypeStruct((2, queries, 4, head_size), jnp.bfloat16)
  k = jax.ShapeDtypeStruct((2, length, 4, head_size), jnp.bfloat16)
  bias = jax.ShapeDtypeStruct((2, 1, 1, length), jnp.float32)
  assert jax_attention.flash_supported(q, k, bias) == supported


def _lowered_for_cuda(function, *shapes):
  """The StableHLO text of jit(function) lowered for CUDA, Pallas kernels included."""
  from jax import export  # pylint: disable=g-import-not-at-top
  triton = export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")
  return export.export(jax.jit(function), platforms=["cuda"],
                       disabled_checks=[triton])(*shapes).mlir_module()


@pytest.mark.parametrize("length,per_query_bias,dtype,rate", [
    (128, False, jnp.bfloat16, 0.1), (512, True, jnp.float32, 0.0)])
def test_the_attention_kernels_lower_to_triton_for_cuda_with_no_head_transposes(
    length, per_query_bias, dtype, rate):
  # Lowering for CUDA runs Pallas's Triton lowering here, without a GPU: what it does not
  # take (an op, a block shape that is not a power of two) fails now, not on the GPU.
  heads = jax.ShapeDtypeStruct((2, length, 4, 64), dtype)
  bias = jax.ShapeDtypeStruct((2, 1, length if per_query_bias else 1, length), jnp.float32)

  def value_and_grads(q, k, v, bias, seed):
    loss = lambda q, k, v: jnp.sum(
        jax_attention.flash_attention(q, k, v, bias, rate, seed).astype(jnp.float32))
    return jax.value_and_grad(loss, argnums=(0, 1, 2))(q, k, v)

  text = _lowered_for_cuda(value_and_grads, heads, heads, heads, bias,
                           jax.ShapeDtypeStruct((2,), jnp.uint32))
  assert re.findall(r'name = "(\w+)"', text) == [
      "_attention_forward_kernel", "_attention_key_value_kernel", "_attention_query_kernel"]
  assert "stablehlo.transpose" not in text


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

  text = _lowered_for_cuda(value_and_grads, rows, vector, rows, vector, vector,
                           jax.ShapeDtypeStruct((2,), jnp.uint32))
  assert re.findall(r'name = "(\w+)"', text) == [
      "_layer_norm_forward_kernel", "_layer_norm_backward_kernel"]


def test_where_the_attention_kernel_does_not_compile_the_xla_form_is_used(caplog):
  from bert_tf.kernels import jax_gpu  # pylint: disable=g-import-not-at-top
  # Here (a CPU) Pallas compiles only in interpret mode: the check fails, and says why.
  assert not jax_gpu.pallas_attention_works()
  assert "attention runs as XLA ops" in caplog.text
  assert jax_gpu.JaxGpuKernels().attention_implementation == "xla"
