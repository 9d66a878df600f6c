"""Tests of the training loop: gradient accumulation, non-finite losses, summaries,
progress lines, resuming, and the constraints a TPU puts on the step."""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import constants
from bert_tf.tasks.pretraining import PretrainingTask
from bert_tf.training import summaries
from bert_tf.training.host_loop import NonFiniteLossError
from bert_tf.utils import errors
from bert_tf.training.trainer import Trainer

import trainer_helpers


def _train(tmp_path, name, **kwargs):
  experiment = trainer_helpers.tiny_experiment(**kwargs)
  trainer = Trainer(experiment, os.path.join(str(tmp_path), name), log_fn=lambda _: None)
  trainer.train()
  return trainer


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


class _NanAfterTask(PretrainingTask):
  """Dummy inputs whose masked_lm_weights become NaN from the 5th batch on."""

  def build_inputs(self, data_config, input_context=None):
    def poison(index, batch):
      batch = dict(batch)
      weights = batch[constants.MASKED_LM_WEIGHTS]
      batch[constants.MASKED_LM_WEIGHTS] = tf.where(index >= 4, weights * np.nan, weights)
      return batch
    return super().build_inputs(data_config, input_context).enumerate().map(poison)


def test_nan_loss_stops_training_and_keeps_the_last_good_checkpoint(tmp_path):
  experiment = trainer_helpers.tiny_experiment(steps=8, optimizer=dict(warmup_steps=0))
  trainer = Trainer(experiment, str(tmp_path), task=_NanAfterTask(experiment),
                    log_fn=lambda _: None)
  with pytest.raises(NonFiniteLossError, match="NaN or Inf within steps 5..6") as raised:
    trainer.train()
  # Reported by the tools in one line that names the good checkpoint.
  assert errors.user_message(raised.value).endswith("ckpt-4")
  latest = tf.train.latest_checkpoint(str(tmp_path))
  assert latest.endswith("ckpt-4")
  reader = tf.train.load_checkpoint(latest)
  for key, dtype in reader.get_variable_to_dtype_map().items():
    if dtype == tf.variant:
      continue  # The input iterator's state.
    value = reader.get_tensor(key)
    if np.issubdtype(np.asarray(value).dtype, np.floating):
      assert np.all(np.isfinite(value)), key
  # The poisoned steps changed nothing: the weights in memory are the checkpoint's.
  restored = Trainer(experiment, str(tmp_path), log_fn=lambda _: None)
  restored.initialize()
  assert int(restored.step.numpy()) == 4
  trainer_helpers.assert_weights_close(trainer_helpers.weights_of(trainer.model),
                                       trainer_helpers.weights_of(restored.model),
                                       atol=0, rtol=0)


def test_resumed_run_matches_an_uninterrupted_one(tmp_path):
  straight = _train(tmp_path, "straight", steps=6)
  experiment = trainer_helpers.tiny_experiment(steps=6)
  model_dir = os.path.join(str(tmp_path), "resumed")
  first = Trainer(experiment, model_dir, log_fn=lambda _: None)
  first.train(train_steps=4)
  second = Trainer(experiment, model_dir, log_fn=lambda _: None)
  second.train()
  assert second.restored_from.endswith("ckpt-4")
  assert int(second.step.numpy()) == 6
  trainer_helpers.assert_weights_close(trainer_helpers.weights_of(straight.model),
                                       trainer_helpers.weights_of(second.model),
                                       atol=1e-7, rtol=1e-6)


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


def test_evaluation_under_mirrored_strategy_gathers_every_replicas_examples(tmp_path):
  experiment = trainer_helpers.tiny_experiment(strategy="mirrored", steps=0)
  trainer = Trainer(experiment, str(tmp_path), log_fn=lambda _: None)
  if trainer.strategy.num_replicas_in_sync < 2:
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
  assert trainer.train_loop_function.experimental_get_tracing_count() == 1
  nodes = _graph_nodes(trainer.train_loop_concrete_function())
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
