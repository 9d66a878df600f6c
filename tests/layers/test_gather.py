"""gather_positions on JAX keeps the batch a batching dimension of its gather
(bert_tf/layers/gather.py), so that a data-parallel step gathers each device's rows on
that device: its forward and backward, compiled for two CPU devices with the batch split
over them, hold no all-gather (nor any other collective), where the flattened form's
global row numbers made XLA's SPMD partitioner gather the batch. Checked in a process of
its own with KERAS_BACKEND=jax (this one runs Keras on TensorFlow)."""

import json
import os
import subprocess
import sys

import pytest

import paths

_SCRIPT = """
import functools, json
import jax, jax.numpy as jnp, numpy as np
from bert_tf.layers import gather
from bert_tf.training.jax_engine import compiled_report

mesh = jax.sharding.Mesh(np.array(jax.devices()), ("batch",))
split = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))

def flattened(sequence, positions):
  batch, length, width = sequence.shape
  rows = positions + jnp.arange(batch)[:, None] * length
  return jnp.take(sequence.reshape(-1, width), rows, axis=0)

def collectives(gather_fn):
  loss = lambda sequence, positions: jnp.sum(gather_fn(sequence, positions) ** 2)
  step = jax.jit(jax.value_and_grad(loss), in_shardings=(split, split))
  hlo = step.lower(jax.ShapeDtypeStruct((8, 16, 32), jnp.float32),
                   jax.ShapeDtypeStruct((8, 4), jnp.int32)).compile().as_text()
  return {op: entry.count for op, entry in compiled_report.collectives(hlo).items()}

print(json.dumps({"devices": len(jax.devices()),
                  "gather_positions": collectives(gather.gather_positions),
                  "flattened": collectives(flattened)}))
"""


@pytest.fixture(scope="module")
def collectives():
  env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=paths.ROOT,
             XLA_FLAGS="--xla_force_host_platform_device_count=2")
  done = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                        text=True, timeout=300, check=False)
  assert done.returncode == 0, done.stderr[-4000:]
  return json.loads(done.stdout.strip().splitlines()[-1])


def test_gathering_positions_of_a_split_batch_needs_no_collective_on_jax(collectives):
  assert collectives["devices"] == 2
  # The loss is summed over the batch: one all-reduce of it, and nothing else.
  assert set(collectives["gather_positions"]) <= {"all-reduce"}, collectives


def test_the_flattened_gather_of_a_split_batch_all_gathers_it(collectives):
  # What the check above guards against: global row numbers into a split batch.
  assert collectives["flattened"].get("all-gather"), collectives
