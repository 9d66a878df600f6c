"""The JAX speed path's dropout masks (bert_tf.kernels.jax_gpu.dropout): drawn at the
rate, reproducible from the seed state, new at every step, independent between
neighbouring elements."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_tf.kernels.jax_gpu import dropout as jax_dropout

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
