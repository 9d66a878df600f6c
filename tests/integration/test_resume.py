"""A run stopped at a step that is no multiple of any cycle and resumed in a new Trainer
ends bit-identical to an uninterrupted run: weights, optimizer slots, the dropout random
state and the input position (shuffle buffers, dynamic masks) all come back."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training import experiments
from bert_tf.training.trainer import Trainer
import finetuning_helpers
import pretraining_fixtures
import trainer_helpers

STOP, TOTAL = 7, 12
ENCODER = dict(trainer_helpers.TINY_ENCODER, dropout_rate=0.1, attention_dropout_rate=0.1)


def _pretraining_experiment(tmp_path, strategy):
  paths = []
  for i in range(2):
    path = str(tmp_path / f"train-{i}.tfrecord")
    pretraining_fixtures.write_record_file(path, num_documents=12, seed=i)
    paths.append(path)
  vocab = pretraining_fixtures.write_vocab(tmp_path)
  data = dict(format="tfrecord", input_path=",".join(paths), seq_length=32,
              max_predictions_per_seq=5, shuffle_buffer_size=16,
              dynamic_masking=True, vocab_file=vocab)
  return trainer_helpers.tiny_experiment(
      batch=4, steps=TOTAL, strategy=strategy, model=dict(encoder=ENCODER),
      train_data=data, eval_data=dict(data, is_training=False),
      trainer=dict(steps_per_loop=3, summary_interval=4, log_interval=4,
                   checkpoint_interval=5),
      runtime=dict(distribution_strategy=strategy, seed=7, deterministic=True))


def _sentence_prediction_experiment(tmp_path, strategy):
  vocab = finetuning_helpers.write_vocab(tmp_path / "vocab.txt")
  rng = np.random.default_rng(0)
  words = ["red", "blue", "green", "dog", "man", "home", "mat", "the", "cat"]
  lines = ["sentence\tlabel"] + [
      f"{' '.join(rng.choice(words, size=rng.integers(3, 9)))}\t{i % 2}" for i in range(40)]
  (tmp_path / "train.tsv").write_text("\n".join(lines) + "\n")
  data = dict(format="tsv", vocab_file=vocab, input_path=str(tmp_path / "train.tsv"))
  experiment = finetuning_helpers.tiny_experiment(
      {"name": "sentence_prediction", "text_a_column": "sentence", "num_classes": 2},
      data, steps=TOTAL, seq_length=16)
  return experiment.override({
      "model": {"encoder": {"dropout_rate": 0.1, "attention_dropout_rate": 0.1},
                "head_dropout_rate": 0.1},
      "train_data": {"global_batch_size": 4},
      "trainer": {"steps_per_loop": 3, "checkpoint_interval": 5, "summary_interval": 4,
                  "log_interval": 4},
      "runtime": {"distribution_strategy": strategy, "seed": 3, "deterministic": True}})


def _state(trainer):
  """Every model and optimizer variable (the seed generators' states included)."""
  values = {f"model/{i}/{v.path}": np.asarray(v.numpy())
            for i, v in enumerate(trainer.model.variables)}
  values.update({f"optimizer/{i}/{v.name}": np.asarray(v.numpy())
                 for i, v in enumerate(trainer.optimizer.variables)})
  return values


def _train(experiment, model_dir, steps):
  keras.backend.clear_session()
  trainer = Trainer(experiment, model_dir, log_fn=lambda _: None)
  trainer.train(train_steps=steps)
  return trainer


def _assert_resume_is_exact(experiment, tmp_path):
  if experiment.runtime.distribution_strategy == "mirrored" and len(
      tf.config.list_logical_devices("CPU")) < 2:
    pytest.skip("needs two logical CPU devices")
  uninterrupted = _state(_train(experiment, str(tmp_path / "whole"), TOTAL))
  resumed_dir = str(tmp_path / "resumed")
  _train(experiment, resumed_dir, STOP)
  resumed_trainer = _train(experiment, resumed_dir, TOTAL)
  assert resumed_trainer.restored_from.endswith(f"ckpt-{STOP}.h5")
  resumed = _state(resumed_trainer)
  assert resumed.keys() == uninterrupted.keys()
  assert any("seed_generator_state" in key for key in resumed)
  for key, value in uninterrupted.items():
    np.testing.assert_array_equal(resumed[key], value, err_msg=key)


# Each task on one strategy: the strategies' own save and restore are alike for every
# task; two replicas (mirrored) are the harder case for the input position.
def test_pretraining_with_dropout_and_dynamic_masking_on_two_replicas_resumes_bit_exactly(
    tmp_path):
  _assert_resume_is_exact(_pretraining_experiment(tmp_path, "mirrored"), tmp_path)


def test_sentence_prediction_with_dropout_resumes_bit_exactly(tmp_path):
  _assert_resume_is_exact(_sentence_prediction_experiment(tmp_path, "one_device"), tmp_path)
