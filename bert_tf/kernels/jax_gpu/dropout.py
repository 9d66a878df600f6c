"""Dropout masks for the JAX speed path, from generators cheaper than Keras's threefry.

Keras's dropout on JAX draws a float32 uniform per element with threefry2x32: 20 rounds
of add-rotate-xor per 64 random bits, about 40 integer operations per element, in every
dropout of the step (dropout 0 saved 5.5 of ~55 ms of a BERT-large step on an H100).
Here a mask is one keyed 32-bit hash per element, compared with a 32-bit threshold:

  "hash"      (default) a counter-based hash: the element's index in the tensor,
              mixed with two 32-bit keys by two rounds of the MurmurHash3 finalizer
              (xor-shift-multiply, a bijection of 32 bits), about 14 integer
              operations, computed where the mask is used, so XLA fuses it into the
              consumer's loop and the attention kernel recomputes it in its backward
              (bert_tf.kernels.jax_gpu.attention) instead of storing it;
  "philox"    XLA's RngBitGenerator with Philox-4x32 (jax's "unsafe_rbg"): 10 rounds
              per 128 bits, 32 bits per element, generated as one array;
  "threefry"  Keras's own dropout (the reference layers' masks).

The hash is the default because it is the only one a kernel can recompute: the fused
attention draws its masks by it whatever the setting, and the other dropouts use it so
that one generator is timed. Masks differ from Keras's but keep its semantics: each
element kept with probability 1 - rate (to 2^-32) and scaled by 1 / (1 - rate).

The keys come from the Dropout layer's own Keras SeedGenerator, advanced once per call
as Keras's dropout advances it: masks differ from step to step and from layer to layer,
and a run restored from a checkpoint (which holds the generators' states) draws the same
masks as the run that wrote it.
"""

import jax
import jax.numpy as jnp
import numpy as np

from bert_tf.kernels.jax_gpu import settings

GENERATORS = settings.DROPOUT_GENERATORS

# MurmurHash3's 32-bit finalizer constants, and a golden-ratio odd multiplier.
_MIX_1 = np.uint32(0x85EBCA6B)
_MIX_2 = np.uint32(0xC2B2AE35)
_GOLDEN = np.uint32(0x9E3779B9)
_KEY_SALT = np.uint32(0x6A09E667)


def _shift(x, bits):
  return jax.lax.shift_right_logical(x, jnp.asarray(bits, x.dtype))


def _finalize(x):
  """MurmurHash3's fmix32: uint32 -> uint32, a bijection with full avalanche."""
  x = x ^ _shift(x, 16)
  x = x * _MIX_1
  x = x ^ _shift(x, 13)
  x = x * _MIX_2
  return x ^ _shift(x, 16)


def hash_keys(seed):
  """The hash's two keys from a Keras seed state: uint32 [2] -> uint32 [2]."""
  seed = jnp.asarray(seed).astype(jnp.uint32)
  first = _finalize(seed[0] ^ _KEY_SALT)
  return jnp.stack([first, _finalize(seed[1] * _GOLDEN ^ first)])


def hash_bits(counter, keys):
  """32 random bits per element: uint32 counters (distinct per element) and uint32 [2]
  keys (hash_keys) -> uint32 of the counters' shape. Usable inside Pallas kernels."""
  x = _finalize(counter * _GOLDEN ^ keys[0])
  return _finalize(x ^ keys[1])


def threshold(rate: float) -> int:
  """The uint32 value at or above which 32 random bits keep an element."""
  return min(int(round(rate * 2.0**32)), 2**32 - 1)


def keep_mask(seed, shape, rate: float, generator: str = "hash"):
  """A dropout keep mask: bool `shape`, True with probability 1 - rate.

  Args:
    seed: uint32 [2], a Keras SeedGenerator state.
    shape: the static shape of the tensor dropped; with "hash", element i of the
      row-major flattened tensor hashes counter i (tensors of 2^32 elements or more
      repeat their masks).
    rate: the dropout rate, in (0, 1).
    generator: "hash" or "philox".
  """
  size = int(np.prod(shape))
  if generator == "hash":
    counter = jax.lax.iota(jnp.uint32, size).reshape(shape)
    bits = hash_bits(counter, hash_keys(seed))
  elif generator == "philox":
    keys = hash_keys(seed)
    key = jnp.concatenate([keys, jnp.asarray(seed).astype(jnp.uint32)])
    _, bits = jax.lax.rng_bit_generator(key, tuple(shape), dtype=jnp.uint32,
                                        algorithm=jax.lax.RandomAlgorithm.RNG_PHILOX)
  else:
    raise ValueError(f"keep_mask: generator must be 'hash' or 'philox', got {generator!r}")
  return bits >= np.uint32(threshold(rate))


def apply_mask(x, keep, rate: float):
  """x scaled by 1 / (1 - rate) where `keep`, 0 elsewhere, in x's dtype."""
  return jnp.where(keep, x * jnp.asarray(1.0 / (1.0 - rate), x.dtype), jnp.zeros([], x.dtype))


def dropout(layer, x, training, generator: str = "hash"):
  """The keras.layers.Dropout `layer` applied to x (in the layer's compute dtype, as its
  call would), with a mask from `generator`; advances the layer's seed generator once,
  as its call does. "threefry" is the layer's own call."""
  if generator == "threefry" or layer.noise_shape is not None:
    return layer(x, training=training)
  x = jnp.asarray(x)
  if layer.autocast and jnp.issubdtype(x.dtype, jnp.floating):
    x = x.astype(layer.compute_dtype)
  if not training or layer.rate == 0:
    return x
  seed = layer.seed_generator.next()
  return apply_mask(x, keep_mask(seed, x.shape, layer.rate, generator), layer.rate)
