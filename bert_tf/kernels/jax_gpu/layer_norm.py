"""The end of each half of a Transformer block, LayerNorm(residual + Dropout(x + bias)),
for the JAX speed path: as one Pallas kernel forward and one backward, and as XLA ops.

XLA on its own computes the LayerNorm as dependent reductions (the mean, then the
variance of the centered sum) and a normalizing loop, each re-reading the [rows, H]
inputs through the bias add, mask and residual sum it fuses in, and it keeps the float32
sum and the mask for the backward. The kernel reads x, the residual and the parameters
once per row forward and writes the output, nothing else; the backward recomputes the
sum and the mask from the same inputs (the hash mask of bert_tf.kernels.jax_gpu.dropout,
counter = row * H + column, as jax_dropout.keep_mask numbers a [rows, H] tensor) and
writes both input gradients in one pass, the bias, gamma and beta gradients summed per
program and then over programs. Rows need not be a power of two wide: columns are
padded to the next one and masked.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from bert_tf.kernels.jax_gpu import dropout as jax_dropout
from bert_tf.kernels.jax_gpu import pallas as jax_pallas

# Backward programs: each sums its rows' parameter gradients, then XLA sums the programs'.
_BACKWARD_PROGRAMS = 256


def _summand(x, bias, rate, keep):
  """Dropout(x + bias) in float32."""
  summand = x.astype(jnp.float32) + bias.astype(jnp.float32)
  return summand if rate == 0 else jnp.where(keep, summand * (1.0 / (1.0 - rate)), 0.0)


def xla_residual_layer_norm(x, bias, residual, gamma, beta, epsilon: float,
                            rate: float = 0.0, seed=None):
  """LayerNorm(residual + Dropout(x + bias)) as XLA ops, in float32.

  Args:
    x: float [..., H], a projection before its bias; bias: float [H].
    residual: float [..., H]; gamma, beta: float32 [H].
    epsilon: the LayerNorm's epsilon.
    rate, seed: the dropout rate (0: none) and the Dropout layer's uint32 [2] seed state.

  Returns:
    [..., H] in residual's dtype.
  """
  keep = jax_dropout.keep_mask(seed, x.shape, rate) if rate > 0 else None
  total = residual.astype(jnp.float32) + _summand(x, bias, rate, keep)
  mean = jnp.mean(total, axis=-1, keepdims=True)
  centered = total - mean
  inv = jax.lax.rsqrt(jnp.mean(jnp.square(centered), axis=-1, keepdims=True) + epsilon)
  return (centered * inv * gamma + beta).astype(residual.dtype)


class _Config(NamedTuple):
  epsilon: float
  rate: float
  interpret: bool


def _row(ref, row, width, dtype=jnp.float32):
  """Row `row` of a [R, H] ref (or the [H] ref itself when row is None), padded to
  `width` columns with zeros."""
  from jax.experimental.pallas import triton as plgpu  # pylint: disable=g-import-not-at-top
  cols = jnp.arange(width)
  index = cols if row is None else (row, cols)
  return plgpu.load(ref.at[index], mask=cols < ref.shape[-1], other=0).astype(dtype)


def _store_row(ref, row, value):
  from jax.experimental.pallas import triton as plgpu  # pylint: disable=g-import-not-at-top
  cols = jnp.arange(value.shape[0])
  plgpu.store(ref.at[row, cols], value.astype(ref.dtype), mask=cols < ref.shape[-1])


def _normalized_row(keys_ref, x_ref, bias_ref, residual_ref, row, global_row, width, config):
  """The row's keep mask, its centered sum and 1 / std (masked to the real columns)."""
  size = x_ref.shape[-1]
  cols = jnp.arange(width)
  keep = None
  if config.rate > 0:
    counter = global_row.astype(jnp.uint32) * np.uint32(size) + cols.astype(jnp.uint32)
    keep = (jax_dropout.hash_bits(counter, (keys_ref[0], keys_ref[1]))
            >= np.uint32(jax_dropout.threshold(config.rate)))
  total = _row(residual_ref, row, width) + _summand(
      _row(x_ref, row, width), _row(bias_ref, None, width), config.rate, keep)
  valid = cols < size
  mean = jnp.sum(jnp.where(valid, total, 0.0)) / size
  centered = jnp.where(valid, total - mean, 0.0)
  inv = jax.lax.rsqrt(jnp.sum(centered * centered) / size + config.epsilon)
  return keep, centered, inv


def _layer_norm_forward_kernel(keys_ref, x_ref, bias_ref, residual_ref, gamma_ref,
                               beta_ref, out_ref, *, width, config):
  _, centered, inv = _normalized_row(keys_ref, x_ref, bias_ref, residual_ref, 0,
                                     pl.program_id(0), width, config)
  _store_row(out_ref, 0, centered * inv * _row(gamma_ref, None, width)
             + _row(beta_ref, None, width))


def _layer_norm_backward_kernel(keys_ref, x_ref, bias_ref, residual_ref, gamma_ref, dy_ref,
                                dx_ref, dres_ref, dparams_ref, *, width, config):
  rows, size = x_ref.shape
  first = pl.program_id(0) * rows
  gamma = _row(gamma_ref, None, width)

  def step(row, sums):
    keep, centered, inv = _normalized_row(keys_ref, x_ref, bias_ref, residual_ref, row,
                                          first + row, width, config)
    dy = _row(dy_ref, row, width)
    normalized = centered * inv
    g = dy * gamma
    d_total = inv * (g - jnp.sum(g) / size - normalized * (jnp.sum(g * normalized) / size))
    d_total = jnp.where(jnp.arange(width) < size, d_total, 0.0)
    d_x = d_total if config.rate == 0 else jnp.where(
        keep, d_total * (1.0 / (1.0 - config.rate)), 0.0)
    _store_row(dres_ref, row, d_total)
    _store_row(dx_ref, row, d_x)
    d_bias, d_gamma, d_beta = sums
    return d_bias + d_x, d_gamma + dy * normalized, d_beta + dy

  zeros = jnp.zeros((width,), jnp.float32)
  sums = jax.lax.fori_loop(0, rows, step, (zeros, zeros, zeros))
  for i, value in enumerate(sums):
    _store_row(dparams_ref, i, value)


def _next_power_of_two(n: int) -> int:
  return 1 << (n - 1).bit_length()


def _vector(size):
  """The BlockSpec of a whole [size] vector, the same for every program."""
  return pl.BlockSpec((size,), lambda i: (0,))


def _forward(config, x, bias, residual, gamma, beta, keys):
  rows, size = x.shape
  width = _next_power_of_two(size)
  row = pl.BlockSpec((1, size), lambda i: (i, 0))
  kernel = functools.partial(_layer_norm_forward_kernel, width=width, config=config)
  return jax_pallas.call(
      kernel, (rows,), [_vector(2), row, _vector(size), row, _vector(size), _vector(size)],
      row, jax.ShapeDtypeStruct(x.shape, residual.dtype),
      (keys, x, bias, residual, gamma, beta), config.interpret, num_stages=1)


def _backward(config, inputs, d_out):
  x, bias, residual, gamma, _, keys = inputs
  rows, size = x.shape
  programs = _BACKWARD_PROGRAMS
  while rows % programs:
    programs //= 2
  block = pl.BlockSpec((rows // programs, size), lambda i: (i, 0))
  kernel = functools.partial(_layer_norm_backward_kernel, width=_next_power_of_two(size),
                             config=config)
  d_x, d_residual, d_params = jax_pallas.call(
      kernel, (programs,), [_vector(2), block, _vector(size), block, _vector(size), block],
      [block, block, pl.BlockSpec((None, 3, size), lambda i: (i, 0, 0))],
      [jax.ShapeDtypeStruct(x.shape, x.dtype),
       jax.ShapeDtypeStruct(residual.shape, residual.dtype),
       jax.ShapeDtypeStruct((programs, 3, size), jnp.float32)],
      (keys, x, bias, residual, gamma, d_out), config.interpret, num_stages=1)
  d_bias, d_gamma, d_beta = jnp.sum(d_params, axis=0)
  return d_x, d_bias.astype(bias.dtype), d_residual, d_gamma, d_beta


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _fused(config, x, bias, residual, gamma, beta, keys):
  return _forward(config, x, bias, residual, gamma, beta, keys)


def _fused_forward(config, x, bias, residual, gamma, beta, keys):
  out = _forward(config, x, bias, residual, gamma, beta, keys)
  return out, (x, bias, residual, gamma, beta, keys)


def _fused_backward(config, inputs, d_out):
  keys = inputs[-1]
  return (*_backward(config, inputs, d_out.astype(inputs[2].dtype)),
          np.zeros(keys.shape, jax.dtypes.float0))


_fused.defvjp(_fused_forward, _fused_backward)


def residual_layer_norm(x, bias, residual, gamma, beta, epsilon: float, rate: float = 0.0,
                        seed=None, interpret: bool = False):
  """xla_residual_layer_norm's function (the same arguments, result and masks) as
  Pallas kernels; `interpret` runs them in Pallas's interpreter."""
  shape = x.shape
  keys = jax_dropout.hash_keys(seed) if rate > 0 else jnp.zeros((2,), jnp.uint32)
  rows = lambda t: jnp.reshape(t, (-1, shape[-1]))
  out = _fused(_Config(float(epsilon), float(rate), bool(interpret)), rows(x), bias,
               rows(residual), gamma.astype(jnp.float32), beta.astype(jnp.float32), keys)
  return jnp.reshape(out, shape)
