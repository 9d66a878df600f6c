"""Distillation: the loss equals its definition, and a step trains the student only."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

import finetuning_helpers
from bert_tf import configs
from bert_tf import losses
from bert_tf import constants
from bert_tf.models.bert_classifier import LOGITS
from bert_tf.tasks import base
from bert_tf.tasks import distillation
from bert_tf.training import trained_model

TEACHER = {"vocab_size": 100, "hidden_size": 48, "num_layers": 3, "num_attention_heads": 3,
           "intermediate_size": 96, "max_position_embeddings": 64, "dropout_rate": 0.0,
           "attention_dropout_rate": 0.0}


def _softmax(values):
  exps = [math.exp(v) for v in values]
  return [e / sum(exps) for e in exps]


def test_loss_equals_its_definition_on_a_hand_example():
  student, teacher, label, t, w = [1.0, 2.0, 0.0], [2.0, 0.0, 1.0], 1, 2.0, 0.3
  hard = -math.log(_softmax(student)[label])
  p_teacher = _softmax([v / t for v in teacher])
  p_student = _softmax([v / t for v in student])
  kl = sum(p * math.log(p / q) for p, q in zip(p_teacher, p_student))
  expected = (1 - w) * hard + w * t * t * kl
  got = losses.distillation_loss(tf.constant([student]), tf.constant([teacher]),
                                       tf.constant([label]), t, w)
  np.testing.assert_allclose(got.numpy(), [expected], rtol=1e-6)
  # The soft term vanishes when the student matches the teacher.
  same = losses.distillation_loss(tf.constant([teacher]), tf.constant([teacher]),
                                        tf.constant([0]), t, 1.0)
  np.testing.assert_allclose(same.numpy(), [0.0], atol=1e-6)


def test_regression_loss_mixes_the_squared_errors():
  got = losses.distillation_loss(tf.constant([[1.5]]), tf.constant([[0.5]]),
                                       tf.constant([3.0]), 4.0, 0.25, regression=True)
  np.testing.assert_allclose(got.numpy(), [0.75 * 1.5 ** 2 + 0.25 * 1.0 ** 2], rtol=1e-6)


def _experiment(tmp_path, teacher_checkpoint, soft_loss_weight=0.5):
  vocab = finetuning_helpers.write_vocab(tmp_path / "vocab.txt")
  return finetuning_helpers.tiny_experiment(
      {"name": "distillation", "glue_task": "mrpc", "teacher_encoder": TEACHER,
       "teacher_checkpoint": teacher_checkpoint, "temperature": 3.0,
       "soft_loss_weight": soft_loss_weight},
      {"format": "dummy"}, vocab_file=vocab)


def _teacher_checkpoint(tmp_path):
  vocab = finetuning_helpers.write_vocab(tmp_path / "vocab.txt")
  teacher_config = finetuning_helpers.tiny_experiment(
      {"name": "sentence_prediction", "glue_task": "mrpc"}, {"format": "dummy"},
      vocab_file=vocab).override({"model": {"encoder": TEACHER}})
  keras.utils.set_random_seed(11)
  teacher = base.get_task(teacher_config).build_model()
  return tf.train.Checkpoint(**teacher.checkpoint_items).save(str(tmp_path / "teacher"))


def test_a_step_trains_the_student_on_the_teachers_soft_labels(tmp_path):
  experiment = _experiment(tmp_path, _teacher_checkpoint(tmp_path))
  task = base.get_task(experiment)
  student = trained_model.build(task)
  assert task.teacher.encoder.num_layers == 3 and student.encoder.num_layers == 2
  assert not task.teacher.trainable_variables
  teacher_before = [v.numpy().copy() for v in task.teacher.weights]
  features = next(iter(task.data_loader(experiment.train_data).dataset()))
  inputs = task.model_inputs(features)
  with tf.GradientTape() as tape:
    outputs = student(inputs, training=True)
    loss = task.compute_loss(features, outputs, 8)["loss"]
  teacher_logits = task.teacher(inputs, training=False)[LOGITS]
  expected = tf.reduce_mean(losses.distillation_loss(
      outputs[LOGITS], teacher_logits, features[constants.LABEL_IDS], 3.0, 0.5))
  np.testing.assert_allclose(loss.numpy(), expected.numpy(), rtol=1e-6)
  grads = tape.gradient(loss, student.trainable_variables)
  assert all(g is not None for g in grads)
  keras.optimizers.SGD(0.1).apply(grads, student.trainable_variables)
  for before, variable in zip(teacher_before, task.teacher.weights):
    np.testing.assert_array_equal(variable.numpy(), before)
  # The student's checkpoint holds the student alone.
  assert set(student.trained_items) == {"encoder", "classifier"}


def test_settings_are_validated(tmp_path):
  with pytest.raises(configs.ConfigError, match="soft_loss_weight"):
    _experiment(tmp_path, "x", soft_loss_weight=1.5)
  with pytest.raises(configs.ConfigError, match="teacher_checkpoint"):
    base.get_task(_experiment(tmp_path, "")).build_model()
