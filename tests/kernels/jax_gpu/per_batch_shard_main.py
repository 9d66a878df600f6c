"""Run as a script with KERAS_BACKEND=jax on two CPU devices: the JAX GPU speed path's
Pallas LayerNorm (interpret mode) run per batch shard (hooks.per_batch_shard) under a
data-parallel keras.distribution, against the same kernel on the whole batch; prints
one JSON line that tests/kernels/jax_gpu/test_per_batch_shard.py asserts on:

  value, grads   without dropout: the largest differences of the output and of the
                 gradients (rows and the shared bias, gamma and beta)
  shards_differ  with dropout, the same row on both shards: whether their masks differ
"""

import functools
import json

import jax
import jax.numpy as jnp
import keras
import numpy as np

from bert_tf.kernels.jax_gpu import hooks
from bert_tf.kernels.jax_gpu import layer_norm as jax_layer_norm

ROWS, LENGTH, WIDTH = 4, 8, 32


def main():
  rng = np.random.default_rng(0)
  x, residual = (jnp.asarray(rng.normal(size=(ROWS, LENGTH, WIDTH)), jnp.float32)
                 for _ in range(2))
  bias, gamma, beta = (jnp.asarray(rng.normal(size=(WIDTH,)), jnp.float32)
                       for _ in range(3))
  batched = (True, False, True, False, False)

  def loss(sharded, rate, seed, *args):
    kernel = functools.partial(jax_layer_norm.residual_layer_norm, epsilon=1e-12,
                               rate=rate, interpret=True)
    out = (hooks.per_batch_shard(kernel, args, batched, seed) if sharded
           else kernel(*args, seed=seed))
    return jnp.sum(out * jnp.arange(out.size, dtype=out.dtype).reshape(out.shape) / out.size), out

  args = (x, bias, residual, gamma, beta)
  plain = jax.jit(jax.value_and_grad(functools.partial(loss, False, 0.0, None),
                                     argnums=range(5), has_aux=True))(*args)
  keras.distribution.set_distribution(keras.distribution.DataParallel(devices=jax.devices()))
  sharding = jax.sharding.NamedSharding(
      keras.distribution.distribution().device_mesh.backend_mesh,
      jax.sharding.PartitionSpec("batch"))
  split = tuple(jax.device_put(a, sharding) if b else a for a, b in zip(args, batched))
  sharded = jax.jit(jax.value_and_grad(functools.partial(loss, True, 0.0, None),
                                       argnums=range(5), has_aux=True))(*split)
  grads = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(plain[1], sharded[1]))
  # The same two rows on each shard: with dropout, their masks must differ.
  same = tuple(jnp.concatenate([a[:2], a[:2]]) if b else a for a, b in zip(args, batched))
  same = tuple(jax.device_put(a, sharding) if b else a for a, b in zip(same, batched))
  _, out = jax.jit(functools.partial(loss, True, 0.5, jnp.asarray([3, 4], jnp.uint32)))(*same)
  print(json.dumps({"value": float(jnp.max(jnp.abs(plain[0][1] - sharded[0][1]))),
                    "grads": grads,
                    "shards_differ": bool(jnp.any(out[:2] != out[2:]))}))


if __name__ == "__main__":
  main()
