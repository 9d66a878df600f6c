"""The JAX GPU speed path's Pallas kernels run per batch shard under data parallelism
(bert_tf.kernels.jax_gpu.hooks.per_batch_shard), so that XLA does not gather the whole
batch to every device for their custom calls: the same output and gradients as on the
whole batch (the shared parameters' gradients summed over the shards), and dropout
masks that differ between shards. Checked in a subprocess on two CPU devices, the
kernels in Pallas's interpreter (tests/kernels/jax_gpu/per_batch_shard_main.py)."""


import pytest

import kernels_helpers


@pytest.fixture(scope="module")
def figures():
  return kernels_helpers.jax_script_figures(
      "per_batch_shard_main.py", XLA_FLAGS="--xla_force_host_platform_device_count=2")


@pytest.mark.slow  # a JAX process
def test_a_kernel_per_batch_shard_computes_the_whole_batchs_values_and_gradients(figures):
  assert figures["value"] <= 1e-5
  assert figures["grads"] <= 1e-5


@pytest.mark.slow  # a JAX process
def test_each_batch_shard_draws_its_own_dropout_masks(figures):
  assert figures["shards_differ"]
