"""Tests of the TensorFlow engine's training loop: gradient accumulation, summaries,
evaluation under MirroredStrategy, and the constraints a TPU puts on the step. The
policies every engine shares (resume, non-finite loss, corrupt input) are in
tests/integration/test_trainer_policies.py."""

import os

import pytest

from bert_tf.training import summaries
from bert_tf.training.trainer import Trainer

import trainer_helpers


def _train(tmp_path, name, **kwargs):
  experiment = trainer_helpers.tiny_experiment(**kwargs)
  trainer = Trainer(experiment, os.path.join(str(tmp_path), name), log_fn=lambda _: None)
  trainer.train()
  return trainer


@pytest.mark.slow  # two trainings
def test_gradient_accumulation_of_4_micro_batches_of_8_equals_one_batch_of_32(tmp_path):
  common = dict(batch=32, steps=2, optimizer=dict(warmup_steps=0, learning_rate=1e-2),
                trainer=dict(steps_per_loop=2, checkpoint_interval=2))
  whole = _train(tmp_path, "whole", **common)
  accumulated = _train(tmp_path, "accumulated",
                       **dict(common, trainer=dict(common["trainer"],
                                                   gradient_accumulation_steps=4)))
  trainer_helpers.assert_weights_close(trainer_helpers.weights_of(whole.model),
                                       trainer_helpers.weights_of(accumulated.model),
                                       atol=2e-6, rtol=1e-4)


@pytest.mark.slow  # a training with evaluations
def test_scalars_are_written_under_train_and_eval(tmp_path):
  trainer = _train(tmp_path, "run", steps=6, trainer=dict(summary_interval=2))
  trainer.evaluate()
  train = summaries.read_scalars(os.path.join(str(tmp_path), "run", "train"))
  for tag in ("loss", "masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss",
              "next_sentence_accuracy", "learning_rate", "gradient_norm",
              "sequences_per_second"):
    assert tag in train, tag
  assert [step for step, _ in train["loss"]] == [2, 4, 6]
  evaluation = summaries.read_scalars(os.path.join(str(tmp_path), "run", "eval"))
  for tag in ("masked_lm_accuracy", "masked_lm_perplexity", "next_sentence_accuracy"):
    assert evaluation[tag][0][0] == 6


@pytest.mark.slow  # a training under MirroredStrategy
def test_evaluation_under_mirrored_strategy_gathers_every_replicas_examples(tmp_path):
  experiment = trainer_helpers.tiny_experiment(strategy="mirrored", steps=0)
  trainer = Trainer(experiment, str(tmp_path), log_fn=lambda _: None)
  if trainer.engine.strategy.num_replicas_in_sync < 2:
    pytest.skip("needs two logical CPU devices")
  metrics = trainer.evaluate()
  assert metrics["num_examples"] == 32  # 4 dummy evaluation batches of 8


def _graph_nodes(concrete):
  graph_def = concrete.graph.as_graph_def()
  nodes = list(graph_def.node)
  for function in graph_def.library.function:
    nodes.extend(function.node_def)
  return nodes


def test_train_step_traces_once_with_static_shapes_and_no_python_ops(tmp_path):
  trainer = _train(tmp_path, "run", steps=6, trainer=dict(steps_per_loop=2))
  assert trainer.engine.train_loop_function.experimental_get_tracing_count() == 1
  nodes = _graph_nodes(trainer_helpers.train_loop_graph(trainer.engine))
  op_types = {node.op for node in nodes}
  assert not op_types & {"PyFunc", "PyFuncStateless", "EagerPyFunc"}
  shapes = [node.attr["output_shapes"] for node in nodes
            if node.op in ("IteratorGetNext", "IteratorGetNextAsOptional")]
  assert shapes
  for shape_list in shapes:
    for shape in shape_list.list.shape:
      assert not shape.unknown_rank and all(d.size >= 0 for d in shape.dim), shape


@pytest.mark.slow  # XLA compilation of the step.
def test_jit_compiled_step_gives_the_loss_of_the_plain_step(tmp_path):
  plain = _train(tmp_path, "plain", steps=2, optimizer=dict(warmup_steps=0))
  jit = _train(tmp_path, "jit", steps=2, optimizer=dict(warmup_steps=0),
               runtime=dict(jit_compile=True))
  trainer_helpers.assert_weights_close(trainer_helpers.weights_of(plain.model),
                                       trainer_helpers.weights_of(jit.model),
                                       atol=1e-5, rtol=1e-4)
