"""Scaled dot-product attention of the JAX speed path, in the [B, T, N, D] layout the
projections produce (no transposes of the heads), with attention-probability dropout.

Two implementations of the same function, masks included:
- `flash_attention`: one Pallas kernel per direction, FlashAttention-style. A program
  holds a block of queries of one head, walks over the keys in blocks with an online
  softmax, and writes the [BQ, D] output and the rows' log-sum-exp; the [B, N, Q, T]
  scores and probabilities never reach memory. Dropout draws its keep decisions inside
  the kernel from the counter-based hash of bert_tf.kernels.jax_gpu.dropout (the element's
  index in [B, N, Q, T], keyed by the layer's seed state), and the backward kernels
  recompute them instead of reading a stored mask. The backward is two kernels: keys
  and values' gradients (a program per key block, looping over the queries) and the
  queries' (a program per query block, looping over the keys), which keeps every sum
  inside one program: no atomics, deterministic results. Runs on GPUs through Pallas's
  Triton backend, and anywhere with `interpret=True` (how the CPU tests check it).
- `xla_attention`: the same maths as XLA ops (einsums, softmax, the same hash mask over
  [B, N, Q, T]); the fallback for shapes the kernel does not take, and its reference.

cuDNN's fused attention (jax.nn.dot_product_attention(implementation="cudnn")) has no
dropout; JAX's private cuDNN entry point with a dropout rate takes the seed as a Python
int fixed at compile time, so every step would draw the same masks, and the masks could
not follow the Keras seed state that checkpoints save.

The attention bias (padding or packing masks) is an input, not a parameter: its
gradient is not computed.
"""

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from bert_tf.kernels.jax_gpu import dropout as jax_dropout
from bert_tf.kernels.jax_gpu import pallas as jax_pallas

# Block edges: at most 64 rows of queries or keys per step (a [64, 64] float32 score
# block and the [64, D] accumulators fit a program's registers at D = 64), at least 16
# (Triton's smallest matmul operand).
_MAX_BLOCK = 64
_MIN_BLOCK = 16


def xla_attention(query, key, value, bias, rate: float = 0.0, seed=None):
  """softmax(Q K^T / sqrt(D) + bias), dropped out, times V, as XLA ops.

  Args:
    query: float [B, Q, N, D]; key, value: float [B, T, N, D] (same dtype).
    bias: float32 [B, 1, 1, T] or [B, 1, Q, T].
    rate: attention-probability dropout rate (0: none).
    seed: uint32 [2], the dropout layer's seed state (with rate > 0).

  Returns:
    [B, Q, N, D] in value's dtype. Scores, softmax and dropout are float32.
  """
  scale = 1.0 / math.sqrt(query.shape[-1])
  scores = jnp.einsum("bqnd,bknd->bnqk", query, key, preferred_element_type=jnp.float32)
  probs = jax.nn.softmax(scores * scale + bias.astype(jnp.float32), axis=-1)
  if rate > 0:
    probs = jax_dropout.apply_mask(
        probs, jax_dropout.keep_mask(seed, probs.shape, rate, "hash"), rate)
  return jnp.einsum("bnqk,bknd->bqnd", probs.astype(value.dtype), value,
                    preferred_element_type=jnp.float32).astype(value.dtype)


def _block(length: int) -> int:
  """The largest power-of-two block in [_MIN_BLOCK, _MAX_BLOCK] dividing `length`, or 0."""
  block = _MAX_BLOCK
  while block >= _MIN_BLOCK and length % block:
    block //= 2
  return block if block >= _MIN_BLOCK else 0


def flash_supported(query, key, bias) -> bool:
  """Whether `flash_attention` takes these shapes: query and key lengths multiples of
  16, a power-of-two head size from 16 to 128, and a per-key or per-query bias."""
  head = query.shape[-1]
  return (_block(query.shape[1]) > 0 and _block(key.shape[1]) > 0
          and head in (16, 32, 64, 128) and bias.ndim == 4 and bias.shape[1] == 1
          and bias.shape[2] in (1, query.shape[1]) and bias.shape[3] == key.shape[1])


class _Config(NamedTuple):
  """The static settings of one attention call."""
  rate: float
  interpret: bool


def _keep(keys_ref, batch, head, rows, cols, heads, queries, length, rate):
  """Keep decisions of the [BQ, BK] block at query rows `rows` [BQ] and key columns
  `cols` [BK] of head `head` in batch row `batch`: the hash of each element's index
  in the [B, N, Q, T] probabilities, as jax_dropout.keep_mask draws it."""
  base = (batch.astype(jnp.uint32) * np.uint32(heads) + head.astype(jnp.uint32))
  row_start = (base * np.uint32(queries) + rows.astype(jnp.uint32)) * np.uint32(length)
  counter = row_start[:, None] + cols.astype(jnp.uint32)[None, :]
  bits = jax_dropout.hash_bits(counter, (keys_ref[0], keys_ref[1]))
  return bits >= np.uint32(jax_dropout.threshold(rate))


def _scores(q, k, bias, scale):
  """[BQ, D] x [BK, D] -> float32 [BQ, BK] scaled scores plus bias [1 or BQ, BK]."""
  s = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())),
                          preferred_element_type=jnp.float32)
  return s * scale + bias


def _attention_forward_kernel(keys_ref, q_ref, k_ref, v_ref, bias_ref, o_ref, lse_ref, *,
                              rate, block_k, heads, queries):
  batch, head, block = pl.program_id(0), pl.program_id(1), pl.program_id(2)
  q = q_ref[...]
  block_q, length = q.shape[0], k_ref.shape[0]
  scale = 1.0 / math.sqrt(q.shape[1])
  rows = block * block_q + jnp.arange(block_q)

  def step(j, carry):
    acc, top, total = carry
    keys = pl.ds(j * block_k, block_k)
    s = _scores(q, k_ref[keys, :], bias_ref[:, keys], scale)
    new_top = jnp.maximum(top, jnp.max(s, axis=1))
    correction = jnp.exp(top - new_top)
    p = jnp.exp(s - new_top[:, None])
    total = total * correction + jnp.sum(p, axis=1)
    if rate > 0:
      cols = j * block_k + jnp.arange(block_k)
      keep = _keep(keys_ref, batch, head, rows, cols, heads, queries, length, rate)
      p = jnp.where(keep, p * (1.0 / (1.0 - rate)), 0.0)
    v = v_ref[keys, :]
    acc = acc * correction[:, None] + jax.lax.dot_general(
        p.astype(v.dtype), v, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)
    return acc, new_top, total

  init = (jnp.zeros(q.shape, jnp.float32), jnp.full((block_q,), -jnp.inf, jnp.float32),
          jnp.zeros((block_q,), jnp.float32))
  acc, top, total = jax.lax.fori_loop(0, length // block_k, step, init)
  o_ref[...] = (acc / total[:, None]).astype(o_ref.dtype)
  lse_ref[...] = top + jnp.log(total)


def _probabilities(q, k, bias, lse, scale):
  """The softmax probabilities of a [BQ, BK] block from the rows' log-sum-exp."""
  return jnp.exp(_scores(q, k, bias, scale) - lse[:, None])


def _attention_key_value_kernel(keys_ref, q_ref, k_ref, v_ref, bias_ref, do_ref, lse_ref,
                                delta_ref, dk_ref, dv_ref, *, rate, block_q, heads,
                                queries, length):
  batch, head, block = pl.program_id(0), pl.program_id(1), pl.program_id(2)
  k, v = k_ref[...], v_ref[...]
  block_k = k.shape[0]
  scale = 1.0 / math.sqrt(k.shape[1])
  cols = block * block_k + jnp.arange(block_k)
  per_query_bias = bias_ref.shape[0] > 1

  def step(i, carry):
    dk, dv = carry
    rows = pl.ds(i * block_q, block_q)
    q, do = q_ref[rows, :], do_ref[rows, :]
    bias = bias_ref[rows, :] if per_query_bias else bias_ref[...]
    p = _probabilities(q, k, bias, lse_ref[rows], scale)
    dp = jax.lax.dot_general(do, v, (((1,), (1,)), ((), ())),
                             preferred_element_type=jnp.float32)
    if rate > 0:
      keep = _keep(keys_ref, batch, head, i * block_q + jnp.arange(block_q), cols,
                   heads, queries, length, rate)
      scaled = 1.0 / (1.0 - rate)
      dropped = jnp.where(keep, p * scaled, 0.0)
      dp = jnp.where(keep, dp * scaled, 0.0)
    else:
      dropped = p
    dv = dv + jax.lax.dot_general(dropped.astype(do.dtype), do, (((0,), (0,)), ((), ())),
                                  preferred_element_type=jnp.float32)
    ds = p * (dp - delta_ref[rows][:, None])
    dk = dk + jax.lax.dot_general(ds.astype(q.dtype), q, (((0,), (0,)), ((), ())),
                                  preferred_element_type=jnp.float32)
    return dk, dv

  init = (jnp.zeros(k.shape, jnp.float32), jnp.zeros(v.shape, jnp.float32))
  dk, dv = jax.lax.fori_loop(0, queries // block_q, step, init)
  dk_ref[...] = (dk * scale).astype(dk_ref.dtype)
  dv_ref[...] = dv.astype(dv_ref.dtype)


def _attention_query_kernel(keys_ref, q_ref, k_ref, v_ref, bias_ref, do_ref, lse_ref,
                            delta_ref, dq_ref, *, rate, block_k, heads, queries):
  batch, head, block = pl.program_id(0), pl.program_id(1), pl.program_id(2)
  q, do = q_ref[...], do_ref[...]
  block_q, length = q.shape[0], k_ref.shape[0]
  scale = 1.0 / math.sqrt(q.shape[1])
  rows = block * block_q + jnp.arange(block_q)
  lse, delta = lse_ref[...], delta_ref[...]

  def step(j, dq):
    keys = pl.ds(j * block_k, block_k)
    k = k_ref[keys, :]
    p = _probabilities(q, k, bias_ref[:, keys], lse, scale)
    dp = jax.lax.dot_general(do, v_ref[keys, :], (((1,), (1,)), ((), ())),
                             preferred_element_type=jnp.float32)
    if rate > 0:
      keep = _keep(keys_ref, batch, head, rows, j * block_k + jnp.arange(block_k),
                   heads, queries, length, rate)
      dp = jnp.where(keep, dp * (1.0 / (1.0 - rate)), 0.0)
    ds = p * (dp - delta[:, None])
    return dq + jax.lax.dot_general(ds.astype(k.dtype), k, (((1,), (0,)), ((), ())),
                                    preferred_element_type=jnp.float32)

  dq = jax.lax.fori_loop(0, length // block_k, step, jnp.zeros(q.shape, jnp.float32))
  dq_ref[...] = (dq * scale).astype(dq_ref.dtype)


_KEYS = pl.BlockSpec((2,), lambda b, n, i: (0,))


def _heads(rows, length, d):
  """The BlockSpec of one head of a [B, L, N, D] array: `rows` rows at block i of the
  grid's third axis, or all `length` rows when rows is None."""
  if rows is None:
    return pl.BlockSpec((None, length, None, d), lambda b, n, i: (b, 0, n, 0))
  return pl.BlockSpec((None, rows, None, d), lambda b, n, i: (b, i, n, 0))


def _bias(per_query, rows, cols, along_keys):
  """The BlockSpec of the [B, 1 or Q, T] bias: `rows` query rows (1 without a
  per-query bias) by `cols` keys, at block i of the grid's third axis along the keys
  (`along_keys`) or along the queries."""
  shape = (None, rows if per_query else 1, cols)
  if along_keys:
    return pl.BlockSpec(shape, lambda b, n, i: (b, 0, i))
  return pl.BlockSpec(shape, lambda b, n, i: (b, i if per_query else 0, 0))


def _rows(rows):
  """The BlockSpec of `rows` entries of a [B, N, Q] array of per-query statistics."""
  return pl.BlockSpec((None, None, rows), lambda b, n, i: (b, n, i))


def _forward(config, query, key, value, bias, keys):
  batch, queries, heads, d = query.shape
  length = key.shape[1]
  block_q, block_k = _block(queries), _block(length)
  kernel = functools.partial(_attention_forward_kernel, rate=config.rate, block_k=block_k,
                             heads=heads, queries=queries)
  return jax_pallas.call(
      kernel, (batch, heads, queries // block_q),
      [_KEYS, _heads(block_q, queries, d), _heads(None, length, d),
       _heads(None, length, d), _bias(bias.shape[1] > 1, block_q, length, False)],
      [_heads(block_q, queries, d), _rows(block_q)],
      [jax.ShapeDtypeStruct(query.shape, value.dtype),
       jax.ShapeDtypeStruct((batch, heads, queries), jnp.float32)],
      (keys, query, key, value, bias), config.interpret)


def _backward(config, residuals, d_out):
  query, key, value, bias, keys, out, lse = residuals
  batch, queries, heads, d = query.shape
  length = key.shape[1]
  block_q, block_k = _block(queries), _block(length)
  per_query = bias.shape[1] > 1
  d_out = d_out.astype(out.dtype)
  delta = jnp.einsum("bqnd,bqnd->bnq", out.astype(jnp.float32), d_out.astype(jnp.float32))
  args = (keys, query, key, value, bias, d_out, lse, delta)

  kernel = functools.partial(_attention_key_value_kernel, rate=config.rate,
                             block_q=block_q, heads=heads, queries=queries, length=length)
  all_rows = pl.BlockSpec((None, None, queries), lambda b, n, i: (b, n, 0))
  d_key, d_value = jax_pallas.call(
      kernel, (batch, heads, length // block_k),
      [_KEYS, _heads(None, queries, d), _heads(block_k, length, d),
       _heads(block_k, length, d), _bias(per_query, queries, block_k, True),
       _heads(None, queries, d), all_rows, all_rows],
      [_heads(block_k, length, d), _heads(block_k, length, d)],
      [jax.ShapeDtypeStruct(key.shape, key.dtype),
       jax.ShapeDtypeStruct(value.shape, value.dtype)], args, config.interpret)

  kernel = functools.partial(_attention_query_kernel, rate=config.rate, block_k=block_k,
                             heads=heads, queries=queries)
  d_query = jax_pallas.call(
      kernel, (batch, heads, queries // block_q),
      [_KEYS, _heads(block_q, queries, d), _heads(None, length, d),
       _heads(None, length, d), _bias(per_query, block_q, length, False),
       _heads(block_q, queries, d), _rows(block_q), _rows(block_q)],
      _heads(block_q, queries, d), jax.ShapeDtypeStruct(query.shape, query.dtype), args,
      config.interpret)
  return d_query, d_key, d_value


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _flash(config, query, key, value, bias, keys):
  return _forward(config, query, key, value, bias, keys)[0]


def _flash_forward(config, query, key, value, bias, keys):
  out, lse = _forward(config, query, key, value, bias, keys)
  return out, (query, key, value, bias, keys, out, lse)


def _flash_backward(config, residuals, d_out):
  d_query, d_key, d_value = _backward(config, residuals, d_out)
  bias, keys = residuals[3], residuals[4]
  return (d_query, d_key, d_value, jnp.zeros_like(bias),
          np.zeros(keys.shape, jax.dtypes.float0))


_flash.defvjp(_flash_forward, _flash_backward)


def flash_attention(query, key, value, bias, rate: float = 0.0, seed=None,
                    interpret: bool = False):
  """xla_attention's function (the same arguments, result and dropout masks) as Pallas
  kernels; see `flash_supported` for the shapes it takes. `interpret` runs the kernels
  in Pallas's interpreter (any device; slow)."""
  if not flash_supported(query, key, bias):
    raise ValueError(f"flash_attention: unsupported shapes query {query.shape}, key "
                     f"{key.shape}, bias {bias.shape}")
  keys = (jax_dropout.hash_keys(seed) if rate > 0 else jnp.zeros((2,), jnp.uint32))
  bias = bias.astype(jnp.float32)[:, 0]  # [B, 1 or Q, T]
  return _flash(_Config(float(rate), bool(interpret)), query, key, value, bias, keys)
