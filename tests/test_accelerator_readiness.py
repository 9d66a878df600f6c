"""What a first GPU or TPU run of the TensorFlow trainer needs, checked on a CPU: the
products of a mixed-precision step in the compute dtype, positions gathered as rows,
dropout masks that differ between replicas, static shapes under XLA, one optimizer
launch per replica, no per-step work on the host, one input pipeline per worker,
collective all-reduce, and a float16 overflow that skips the step."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import layers
from bert_tf.training.trainer import Trainer
import trainer_helpers

_MATMULS = ("MatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum")


def _graph_nodes(graph_def):
  """Every node of a GraphDef, those of its function library included."""
  nodes = list(graph_def.node)
  for function in graph_def.library.function:
    nodes.extend(function.node_def)
  return nodes


def _output_dtype(node):
  """The dtype a matmul node computes in."""
  attr = "Tout" if node.op == "BatchMatMulV3" else "T"
  return tf.as_dtype(node.attr[attr].type)


def _mixed_precision_trainer(tmp_path, precision, fused_kernels):
  encoder = dict(trainer_helpers.TINY_ENCODER, dropout_rate=0.1, attention_dropout_rate=0.1)
  experiment = trainer_helpers.tiny_experiment(
      model=dict(encoder=encoder),
      runtime=dict(mixed_precision_dtype=precision, fused_kernels=fused_kernels))
  return Trainer(experiment, str(tmp_path), log_fn=lambda _: None)


@pytest.mark.parametrize("fused_kernels", [False, True])
@pytest.mark.parametrize("precision,compute_dtype", [("mixed_float16", tf.float16),
                                                     ("mixed_bfloat16", tf.bfloat16)])
def test_every_matmul_of_a_mixed_precision_training_step_runs_in_the_compute_dtype(
    tmp_path, precision, compute_dtype, fused_kernels):
  trainer = _mixed_precision_trainer(tmp_path, precision, fused_kernels)
  trainer.initialize()
  graph_def = trainer.train_loop_concrete_function().graph.as_graph_def()
  matmuls = [node for node in _graph_nodes(graph_def) if node.op in _MATMULS]
  # Forward and backward of Q, K, V, attention, output, FFN, pooler and heads.
  assert len(matmuls) > 20
  wrong = sorted({f"{node.name}: {_output_dtype(node).name}" for node in matmuls
                  if _output_dtype(node) != compute_dtype})
  assert not wrong, wrong


def _take_along_axis_gather(sequence, positions):
  """The gather that gather_positions replaced (keras.ops.take_along_axis)."""
  return keras.ops.take_along_axis(sequence, positions[:, :, None], axis=1)


def test_positions_are_gathered_as_rows_without_a_batch_by_positions_by_width_index():
  batch, length, width, count = 3, 7, 5, 4
  sequence = tf.random.stateless_normal([batch, length, width], seed=[1, 2])
  positions = tf.constant([[0, 6, 3, 3], [1, 2, 5, 0], [6, 6, 6, 4]], tf.int32)
  np.testing.assert_array_equal(layers.gather_positions(sequence, positions).numpy(),
                                _take_along_axis_gather(sequence, positions).numpy())

  concrete = tf.function(layers.gather_positions).get_concrete_function(
      tf.TensorSpec([batch, length, width]), tf.TensorSpec([batch, count], tf.int32))
  nodes = _graph_nodes(concrete.graph.as_graph_def())
  gathers = [node for node in nodes if node.op in ("GatherV2", "GatherNd",
                                                   "ResourceGather")]
  assert [node.op for node in gathers] == ["GatherV2"]
  # No index tensor broadcast to [B, P, H], as take_along_axis builds one.
  ops = concrete.graph.get_operations()
  index_shapes = [tuple(t.shape.as_list()) for op in ops for t in op.outputs
                  if t.dtype.is_integer and t.shape.rank == 3]
  assert (batch, count, width) not in index_shapes, index_shapes
  gather = next(op for op in ops if op.type == "GatherV2")
  assert gather.inputs[0].shape.as_list() == [batch * length, width]
  assert gather.inputs[1].shape.as_list() == [batch, count]


def _two_cpus():
  if len(tf.config.list_logical_devices("CPU")) < 2:
    pytest.skip("needs two logical CPU devices (tests/conftest.py)")


def test_the_optimizer_update_is_one_compiled_launch_per_replica_without_a_conditional(
    tmp_path):
  _two_cpus()
  trainer = Trainer(trainer_helpers.tiny_experiment(strategy="mirrored"), str(tmp_path),
                    log_fn=lambda _: None)
  trainer.initialize()
  graph_def = trainer.train_loop_concrete_function().graph.as_graph_def()
  functions = {f.signature.name: f for f in graph_def.library.function}
  nodes = _graph_nodes(graph_def)
  # Compiled launches that write variables: the optimizer's updates.
  updates = [node for node in nodes
             if node.op in ("PartitionedCall", "StatefulPartitionedCall")
             and node.attr["_XlaMustCompile"].b
             and any(n.op == "AssignVariableOp"
                     for n in functions[node.attr["f"].func.name].node_def)]
  assert len(updates) == trainer.strategy.num_replicas_in_sync == 2
  # Each writes every trainable variable and its two Adam slots.
  written = [sum(n.op == "AssignVariableOp"
                 for n in functions[node.attr["f"].func.name].node_def) for node in updates]
  assert written == [3 * len(trainer.model.trainable_variables)] * 2
  # A skipped step is a select inside those loops, not a conditional.
  assert not [node.name for node in nodes if node.op in ("If", "StatelessIf")]
