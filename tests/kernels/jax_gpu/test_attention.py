"""The JAX speed path's attention (bert_tf.kernels.jax_gpu.attention): the Pallas kernel
in interpret mode against the same maths as XLA ops, and lowered for CUDA through
Pallas's Triton lowering (no GPU needed). Tolerances: float32 outputs and gradients 1e-5
absolute; bfloat16 2% of the largest value."""

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_tf.kernels.jax_gpu import attention as jax_attention
import kernels_helpers

SEED = np.array([1234, 0], np.uint32)


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

  text = kernels_helpers.lowered_for_cuda(value_and_grads, heads, heads, heads, bias,
                           jax.ShapeDtypeStruct((2,), jnp.uint32))
  assert re.findall(r'name = "(\w+)"', text) == [
      "_attention_forward_kernel", "_attention_key_value_kernel", "_attention_query_kernel"]
  assert "stablehlo.transpose" not in text
