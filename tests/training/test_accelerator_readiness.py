"""What a first GPU or TPU run of the TensorFlow trainer needs, checked on a CPU: the
products of a mixed-precision step in the compute dtype, positions gathered as rows,
dropout masks that differ between replicas, static shapes under XLA, one optimizer
launch per replica, no per-step work on the host, one input pipeline per worker,
collective all-reduce, and a float16 overflow that skips the step."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import configs
from bert_tf import constants
from bert_tf import layers
from bert_tf.checkpoints import portable
from bert_tf.data.pipelines import batching
from bert_tf.kernels.tensorflow_cpu import fused
from bert_tf.tasks.pretraining import PretrainingTask
from bert_tf.training.trainer import Trainer
import trainer_helpers
import xla_compiles_main
import paths

_HERE = paths.TESTS_DIR

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
  graph_def = trainer_helpers.train_loop_graph(trainer.engine).graph.as_graph_def()
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
  graph_def = trainer_helpers.train_loop_graph(trainer.engine).graph.as_graph_def()
  functions = {f.signature.name: f for f in graph_def.library.function}
  nodes = _graph_nodes(graph_def)
  # Compiled launches that write variables: the optimizer's updates.
  updates = [node for node in nodes
             if node.op in ("PartitionedCall", "StatefulPartitionedCall")
             and node.attr["_XlaMustCompile"].b
             and any(n.op == "AssignVariableOp"
                     for n in functions[node.attr["f"].func.name].node_def)]
  assert len(updates) == trainer.engine.strategy.num_replicas_in_sync == 2
  # Each writes every trainable variable and its two Adam slots.
  written = [sum(n.op == "AssignVariableOp"
                 for n in functions[node.attr["f"].func.name].node_def) for node in updates]
  assert written == [3 * len(trainer.model.trainable_variables)] * 2
  # A skipped step is a select inside those loops, not a conditional.
  assert not [node.name for node in nodes if node.op in ("If", "StatelessIf")]


def _dropout_experiment(strategy, steps=3, **sections):
  encoder = dict(trainer_helpers.TINY_ENCODER, dropout_rate=0.1, attention_dropout_rate=0.1)
  return trainer_helpers.tiny_experiment(strategy=strategy, steps=steps,
                                         model=dict(encoder=encoder), **sections)


@pytest.mark.slow
def test_each_replica_draws_its_own_dropout_masks_and_a_run_repeats_bit_exactly(tmp_path):
  _two_cpus()
  trainer = Trainer(_dropout_experiment("mirrored"), str(tmp_path / "masks"),
                    log_fn=lambda _: None)
  trainer.initialize()
  strategy = trainer.engine.strategy
  block = trainer.model.encoder.transformer_layers[0]

  @tf.function
  def masks():
    def replica_masks():
      ones = tf.ones([4, 64])
      # The reference layers' Keras Dropout and the CPU path's 16-bit masks.
      return (block.output_dropout(ones, training=True),
              fused.keep_bits(block.attention_dropout, ones, True)[0])
    return strategy.run(replica_masks)

  for per_replica in masks():
    first, second = strategy.experimental_local_results(per_replica)
    assert not np.array_equal(first.numpy(), second.numpy())

  runs = []
  for name in ("first", "second"):
    keras.backend.clear_session()
    run = Trainer(_dropout_experiment("mirrored"), str(tmp_path / name),
                  log_fn=lambda _: None)
    run.train()
    runs.append(trainer_helpers.weights_of(run.model))
  trainer_helpers.assert_weights_close(*runs, atol=0, rtol=0)
  # Resumed, a mirrored run with dropout ends bit-identical too
  # (tests/integration/test_resume.py).


def test_pad_to_length_bucket_pads_each_token_feature_to_the_next_bound():
  batch = {
      "input_word_ids": tf.ones([2, 5], tf.int32),
      "input_mask": tf.ones([2, 5], tf.int32),
      "input_type_ids": tf.ones([2, 5], tf.int32),
      "label_ids": tf.ones([2, 5], tf.int32),  # tagging: one label per token
      "example_index": tf.constant([3, 4], tf.int32),
  }
  fills = dict.fromkeys(constants.ENCODER_INPUTS, 0)
  fills["label_ids"] = constants.IGNORE_LABEL  # the tagging kind's fill
  padded = batching.pad_to_length_bucket(batch, [4, 8, 16], fills)
  assert padded["input_word_ids"].shape == [2, 8]
  np.testing.assert_array_equal(padded["input_mask"].numpy()[:, 5:], 0)
  np.testing.assert_array_equal(padded["label_ids"].numpy()[:, 5:], constants.IGNORE_LABEL)
  np.testing.assert_array_equal(padded["example_index"].numpy(), [3, 4])
  # Multiple choice [B, C, T]; a length at a bound stays; one bound gives a static shape.
  choices = {key: tf.ones([2, 3, 8], tf.int32) for key in constants.ENCODER_INPUTS}
  assert batching.pad_to_length_bucket(choices, [8, 16], fills)["input_mask"].shape == [
      2, 3, 8]

  @tf.function(input_signature=[tf.TensorSpec([2, None], tf.int32)])
  def traced(ids):
    return batching.pad_to_length_bucket({"input_word_ids": ids}, [16],
                                         fills)["input_word_ids"]

  assert traced.get_concrete_function().output_shapes.as_list() == [2, 16]


def _lengths(dataset, batches):
  return {int(batch[constants.INPUT_WORD_IDS].shape[-1]) for batch in dataset.take(batches)}


def _fake_tpu(monkeypatch):
  """Makes the trainer take OneDeviceStrategy for a TPUStrategy (its checks and input
  padding; the step still runs on the CPU)."""
  monkeypatch.setattr(tf.distribute, "TPUStrategy", tf.distribute.OneDeviceStrategy)


@pytest.mark.parametrize("where", ["jit_compile", "tpu"])
def test_under_xla_and_on_a_tpu_training_batches_come_in_the_bucket_lengths_only(
    tmp_path, monkeypatch, where):
  if where == "tpu":
    _fake_tpu(monkeypatch)
  experiment = xla_compiles_main.sentence_prediction_experiment(
      str(tmp_path), jit_compile=where == "jit_compile")
  trainer = Trainer(experiment, str(tmp_path / "model"), log_fn=lambda _: None)
  assert trainer.engine.pads_to_length_buckets
  context = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                       num_replicas_in_sync=1)
  bounds = {*xla_compiles_main.LENGTH_BUCKETS, xla_compiles_main.SEQ_LENGTH}
  unpadded = _lengths(trainer.task.data_loader(experiment.train_data).dataset(context), 20)
  assert not unpadded <= bounds
  assert _lengths(trainer.engine.inputs.build_inputs(experiment.train_data, context), 20) <= bounds
  # On a TPU the evaluation batches too (the step runs there).
  evaluated = _lengths(trainer.engine.inputs.build_inputs(experiment.eval_data, context), 8)
  assert (evaluated <= bounds) == (where == "tpu")


@pytest.mark.parametrize("override,match", [
    ({"train_data": {"length_buckets": [], "pack_examples": True}}, "pack_examples"),
    ({"train_data": {"drop_remainder": False}}, "drop_remainder")])
def test_a_tpu_refuses_training_inputs_whose_shapes_vary(tmp_path, monkeypatch, override,
                                                         match):
  _fake_tpu(monkeypatch)
  experiment = xla_compiles_main.sentence_prediction_experiment(
      str(tmp_path), jit_compile=False).override(override)
  with pytest.raises(configs.ConfigError, match=match):
    Trainer(experiment, str(tmp_path / "model"), log_fn=lambda _: None)


def test_pack_examples_is_refused_where_the_step_compiles_once_per_shape(tmp_path):
  experiment = xla_compiles_main.sentence_prediction_experiment(
      str(tmp_path), jit_compile=True).override(
          {"train_data": {"length_buckets": [], "pack_examples": True}})
  with pytest.raises(configs.ConfigError, match="pack_examples"):
    Trainer(experiment, str(tmp_path / "model"), log_fn=lambda _: None)


@pytest.mark.slow  # XLA compilation of three step shapes, in a process of its own.
def test_a_jit_compiled_fine_tuning_run_compiles_its_step_once_per_length_bucket(tmp_path):
  output = tmp_path / "compiles.json"
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  env.pop("XLA_FLAGS", None)
  result = subprocess.run([sys.executable, os.path.join(_HERE, "xla_compiles_main.py"),
                           str(tmp_path), str(output)], env=env, capture_output=True,
                          text=True, timeout=900, check=False)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  counts = json.loads(output.read_text())
  bounds = {*xla_compiles_main.LENGTH_BUCKETS, xla_compiles_main.SEQ_LENGTH}
  # The batches come in lengths that are no bucket bound; the step compiles per bucket,
  # not per length.
  assert not set(counts["lengths"]) <= bounds, counts
  assert 1 <= counts["compilations"] <= min(len(bounds), len(counts["lengths"]) - 1), counts


def _host_ops_per_step(trainer, monkeypatch):
  """The ops of the training loop's body that are not made by strategy.run: what the
  host runs for every step."""
  strategy = trainer.engine.strategy
  run = strategy.run
  bodies = []  # [(graph, names of the ops strategy.run made in it)]

  def recording_run(fn, args=(), kwargs=None, options=None):
    graph = tf.compat.v1.get_default_graph()
    before = {op.name for op in graph.get_operations()}
    result = run(fn, args=args, kwargs=kwargs, options=options)
    bodies.append((graph, {op.name for op in graph.get_operations()} - before))
    return result

  monkeypatch.setattr(strategy, "run", recording_run)
  trainer_helpers.train_loop_graph(trainer.engine)
  assert len(bodies) == 1
  graph, made_by_run = bodies[0]
  return [op for op in graph.get_operations() if op.name not in made_by_run]


@pytest.mark.parametrize("strategy", ["one_device", "mirrored"])
def test_the_host_loop_only_reads_the_input_and_launches_each_step(tmp_path, monkeypatch,
                                                                  strategy):
  if strategy == "mirrored":
    _two_cpus()
  trainer = Trainer(trainer_helpers.tiny_experiment(strategy=strategy), str(tmp_path),
                    log_fn=lambda _: None)
  trainer.initialize()
  host_ops = _host_ops_per_step(trainer, monkeypatch)
  assert any(op.type == "IteratorGetNext" for op in host_ops)
  # No variable read or write (the step counter, running totals) and no float
  # arithmetic on the host per step: on a TPU each would be a round trip.
  per_step = sorted(f"{op.type} {op.name}" for op in host_ops
                    if "Variable" in op.type or
                    (op.type not in ("Identity", "IteratorGetNext") and
                     any(t.dtype.is_floating for t in op.outputs)))
  assert not per_step, per_step


class _Float16OverflowTask(PretrainingTask):
  """Pretraining whose second batch overflows float16 in the forward pass: its
  masked-LM logits are multiplied by 65000, twice, in float16."""

  def data_loader(self, data_config):
    def flag(index, batch):
      return dict(batch, overflow=tf.cast(index == 1, tf.float16))
    loader = super().data_loader(data_config)
    dataset = loader.dataset
    loader.dataset = lambda *args: dataset(*args).enumerate().map(flag)
    return loader

  def compute_loss(self, features, outputs, global_batch_size, **normalizers):
    factor = 1.0 + 65000.0 * features["overflow"]
    logits = tf.cast(outputs[constants.MLM_LOGITS], tf.float16) * factor * factor
    return super().compute_loss(features, dict(outputs, **{constants.MLM_LOGITS: logits}),
                                global_batch_size, **normalizers)


@pytest.mark.slow  # a mixed_float16 training
def test_a_float16_overflow_in_the_forward_pass_skips_the_step_and_halves_the_scale(
    tmp_path):
  experiment = trainer_helpers.tiny_experiment(
      steps=3, optimizer=dict(warmup_steps=0),
      trainer=dict(steps_per_loop=1, summary_interval=1, log_interval=1,
                   checkpoint_interval=3),
      runtime=dict(mixed_precision_dtype="mixed_float16"))
  trainer = Trainer(experiment, str(tmp_path), task=_Float16OverflowTask(experiment),
                    log_fn=lambda _: None)
  scale = float(trainer.engine.loss_scale.scale.numpy())
  trainer.train(train_steps=1)
  before = trainer_helpers.weights_of(trainer.model)
  slots = [v.numpy() for v in trainer.optimizer.variables]
  trainer.train(train_steps=2)  # the overflowing batch: no NonFiniteLossError
  assert trainer.step == 2
  assert float(trainer.engine.loss_scale.scale.numpy()) == scale / 2
  trainer_helpers.assert_weights_close(trainer_helpers.weights_of(trainer.model), before,
                                       atol=0, rtol=0)
  for old, new in zip(slots, trainer.optimizer.variables):
    np.testing.assert_array_equal(new.numpy(), old)
  report = trainer.train(train_steps=3)  # the next batch trains again
  assert np.isfinite(report["loss"])
  assert not np.array_equal(trainer.model.trainable_variables[0].numpy(),
                            before[trainer.model.trainable_variables[0].path])


@pytest.mark.slow
def test_several_trainers_in_one_process_train_and_evaluate_with_collective_all_reduce(
    tmp_path):
  _two_cpus()
  trainers = []
  for i, encoder in enumerate((trainer_helpers.TINY_ENCODER,
                               dict(trainer_helpers.TINY_ENCODER, hidden_size=16))):
    keras.backend.clear_session()
    experiment = trainer_helpers.tiny_experiment(strategy="mirrored", steps=2,
                                                 model=dict(encoder=encoder))
    trainer = Trainer(experiment, str(tmp_path / str(i)), log_fn=lambda _: None)
    trainer.train()
    assert trainer.evaluate()["num_examples"] == 32
    trainers.append(trainer)
  # TensorFlow's collective all-reduce, the ops MirroredStrategy runs between GPUs
  # (NCCL) and here between logical CPU devices (ring).
  for trainer in trainers:
    graph_def = trainer_helpers.train_loop_graph(trainer.engine).graph.as_graph_def()
    ops = {node.op for node in _graph_nodes(graph_def)}
    assert "CollectiveReduceV2" in ops
  assert trainers[0].engine.strategy is trainers[1].engine.strategy


@pytest.mark.slow
def test_mirrored_training_reads_one_input_pipeline_and_checkpoints_its_position(tmp_path):
  _two_cpus()
  trainer = Trainer(trainer_helpers.tiny_experiment(strategy="mirrored", steps=2),
                    str(tmp_path), log_fn=lambda _: None)
  trainer.train()
  assert isinstance(trainer.engine.training_input().iterator, tf.data.Iterator)
  # One position for the run, in the checkpoint: the global batches read.
  assert portable.read(str(tmp_path / "ckpt-2.h5")).position["batches_read"] == 2
  assert not [name for name in os.listdir(tmp_path) if ".input" in name]
