"""The JAX GPU speed path's hooks (bert_tf.kernels.protocol.Kernels): the Pallas
attention, the hashed dropout masks and the fused residual LayerNorm of this package
applied to the layers' Keras sublayers (imports JAX). Why each one:
bert_tf.kernels.jax_gpu."""

import functools
import logging

import jax
import jax.numpy as jnp
import keras
import numpy as np
from keras import ops

from bert_tf.kernels import protocol
from bert_tf.kernels.jax_gpu import attention as jax_attention
from bert_tf.kernels.jax_gpu import dropout as jax_dropout
from bert_tf.kernels.jax_gpu import layer_norm as jax_layer_norm
from bert_tf.kernels.jax_gpu import settings

ATTENTION = settings.ATTENTION
LAYER_NORM = settings.LAYER_NORM


@functools.lru_cache(maxsize=None)
def pallas_attention_works() -> bool:
  """Whether the Pallas attention compiles on JAX's default device and agrees with the
  XLA form there, forward and backward, with dropout (bfloat16, B=2, T=64, N=2, D=64).
  Logs why not."""
  rng = np.random.default_rng(0)
  q, k, v, d_out = (jnp.asarray(rng.normal(size=(2, 64, 2, 64)), jnp.bfloat16)
                    for _ in range(4))
  bias = jnp.asarray(np.where(rng.random((2, 1, 1, 64)) < 0.2, -10000.0, 0.0), jnp.float32)
  seed = jnp.asarray([1, 2], jnp.uint32)

  def value_and_grads(attend):
    loss = lambda *qkv: jnp.sum(attend(*qkv, bias, 0.1, seed).astype(jnp.float32) * d_out)
    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))(q, k, v)

  try:
    fused = value_and_grads(jax_attention.flash_attention)
    plain = value_and_grads(jax_attention.xla_attention)
  except Exception as error:  # pylint: disable=broad-except
    logging.warning("bert_tf: the Pallas attention kernel does not compile here (%s); "
                    "attention runs as XLA ops", error)
    return False
  for a, b in zip(jax.tree_util.tree_leaves(fused), jax.tree_util.tree_leaves(plain)):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    if not np.allclose(a, b, rtol=5e-2, atol=5e-2 * max(1.0, float(np.abs(b).max()))):
      logging.warning("bert_tf: the Pallas attention kernel disagrees with XLA here "
                      "(max difference %g); attention runs as XLA ops",
                      float(np.abs(a - b).max()))
      return False
  return True


# Mixed into the seed of each batch shard's masks (the golden ratio's bits).
_SHARD_SALT = 0x9E3779B9


def per_batch_shard(kernel, args, batched, seed):
  """kernel(*args, seed=seed) on each device's rows where a keras.distribution splits
  the batch over several devices (jax.shard_map), else on the whole batch.

  A Pallas kernel is a custom call that XLA's SPMD partitioner cannot split: left to it,
  every device gathers the whole batch and computes all of it. Here `args` whose
  `batched` entry is true are split along their first axis, the others are passed whole
  (their gradients summed over the devices), and each shard's dropout masks are keyed by
  `seed` (uint32 [2]; None: no dropout) with the shard's index mixed in, so that the
  devices' masks differ as their rows do.
  """
  distribution = keras.distribution.distribution()
  mesh = axis = None
  if isinstance(distribution, keras.distribution.DataParallel):
    mesh = distribution.device_mesh.backend_mesh
    axis = distribution.batch_dim_name
  if mesh is None or mesh.shape[axis] == 1:
    return kernel(*args, seed=seed)

  def local(*args_and_seed):
    *local_args, seed = args_and_seed
    if seed is not None:
      shard = jax.lax.axis_index(axis).astype(jnp.uint32)
      seed = jnp.asarray(seed, jnp.uint32)
      seed = seed.at[0].set(seed[0] ^ (shard * jnp.uint32(_SHARD_SALT)))
    return kernel(*local_args, seed=seed)

  split, whole = jax.sharding.PartitionSpec(axis), jax.sharding.PartitionSpec()
  return jax.shard_map(local, mesh=mesh,
                       in_specs=tuple(split if b else whole for b in (*batched, False)),
                       out_specs=split, check_vma=False)(*args, seed)


class JaxGpuKernels(protocol.Kernels):
  """The JAX GPU speed path (bert_tf.kernels.protocol.Kernels).

  Args:
    attention: "auto" (the Pallas kernel where JAX runs on a GPU and the kernel
      compiles and agrees with XLA there, checked once per process; XLA ops
      elsewhere), "pallas" (the kernel wherever it takes the shapes) or "xla".
    dropout_generator: the masks of every dropout but the attention probabilities'
      (jax_dropout.GENERATORS; "threefry" is Keras's own). The probabilities are
      dropped by the hash in either attention form, and so are the block's two
      residual dropouts with layer_norm="pallas".
    layer_norm: "xla" or "pallas", the end of each half of a block (see above).
    interpret: run the Pallas kernels in Pallas's interpreter (for CPUs and tests).
    target: built for a GPU this process does not have (the ahead-of-time compile):
      "auto" is the Pallas kernel, as on a GPU where it works; whether it compiles is
      the compile's to say.
  """

  name = "jax_gpu"

  def __init__(self, attention: str = "auto", dropout_generator: str = "hash",
               layer_norm: str = "xla", interpret: bool = False, target: bool = False):
    if attention not in ATTENTION:
      raise ValueError(f"attention must be one of {ATTENTION}, got {attention!r}")
    if layer_norm not in LAYER_NORM:
      raise ValueError(f"layer_norm must be one of {LAYER_NORM}, got {layer_norm!r}")
    if dropout_generator not in jax_dropout.GENERATORS:
      raise ValueError(f"dropout_generator must be one of {jax_dropout.GENERATORS}, got "
                       f"{dropout_generator!r}")
    if attention == "auto":
      on_gpu = jax.default_backend() == "gpu"
      attention = ("pallas" if (interpret or target or on_gpu and pallas_attention_works())
                   else "xla")
    self.attention_implementation = attention
    self.dropout_generator = dropout_generator
    self.layer_norm_implementation = layer_norm
    self.interpret = interpret

  def dropout(self, layer, x, training):
    """The keras.layers.Dropout `layer` applied to x with this path's masks."""
    return jax_dropout.dropout(layer, x, training, self.dropout_generator)

  def attention(self, query, key, value, attention_bias, dropout, training):
    """The Pallas kernel where it takes the shapes, its XLA form elsewhere: the
    probabilities dropped by the hash, keyed by `dropout`'s seed generator."""
    rate = dropout.rate if training else 0.0
    seed = dropout.seed_generator.next() if rate > 0 else None
    if (self.attention_implementation == "pallas"
        and jax_attention.flash_supported(query, key, attention_bias)):
      attend = functools.partial(jax_attention.flash_attention, rate=rate,
                                 interpret=self.interpret)
      out = per_batch_shard(attend, (query, key, value, attention_bias), (True,) * 4, seed)
    else:
      out = jax_attention.xla_attention(query, key, value, attention_bias, rate, seed)
    return jnp.reshape(out, out.shape[:2] + (out.shape[2] * out.shape[3],))

  def residual_layer_norm(self, dense, x, residual, dropout, layer_norm, training):
    """With layer_norm="pallas", one kernel forward and one backward. A dense layer that
    computes itself (quantized, LoRA) or has an activation adds its bias itself."""
    if self.layer_norm_implementation == "xla":
      return super().residual_layer_norm(dense, x, residual, dropout, layer_norm, training)
    plain = not protocol.dense_computes_itself(dense) and dense.activation in (
        None, keras.activations.linear) and dense.use_bias
    projected = ops.matmul(x, dense.kernel) if plain else dense(x)
    rate = dropout.rate if training else 0.0
    seed = dropout.seed_generator.next() if rate > 0 else None

    # The LayerNorm's parameters read as float32 (Keras never autocasts them), the bias
    # as the Dense layer reads it (in the compute dtype).
    bias = (ops.convert_to_tensor(dense.bias) if plain
            else jnp.zeros((projected.shape[-1],), projected.dtype))
    kernel = functools.partial(jax_layer_norm.residual_layer_norm, epsilon=layer_norm.epsilon,
                               rate=rate, interpret=self.interpret)
    return per_batch_shard(
        kernel, (projected, bias, residual, ops.convert_to_tensor(layer_norm.gamma),
                 ops.convert_to_tensor(layer_norm.beta)),
        (True, False, True, False, False), seed)

  def __repr__(self):
    return (f"bert_tf.kernels.jax_gpu.hooks.JaxGpuKernels(attention="
            f"{self.attention_implementation!r}, dropout_generator="
            f"{self.dropout_generator!r}, layer_norm={self.layer_norm_implementation!r})")
