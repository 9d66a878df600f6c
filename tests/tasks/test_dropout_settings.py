"""The three settings docs/pretraining.md names for turning every dropout off
(model.encoder.dropout_rate, model.encoder.attention_dropout_rate, model.head_dropout_rate):
with them, each task's model outputs in training mode exactly what it outputs in
inference mode; without them, the two differ (so the settings, not the input, decide)."""

import numpy as np
import pytest

import trainer_helpers
from bert_tf.tasks import base
from bert_tf.training import experiments

DROPOUT_OFF = ("model.encoder.dropout_rate=0", "model.encoder.attention_dropout_rate=0",
               "model.head_dropout_rate=0")
# Every registered task but distillation, whose student is sentence_prediction's model
# (and which needs a teacher checkpoint to build).
TASKS = ("multiple_choice", "pretraining", "sentence_prediction", "squad", "tagging")


def _training_and_inference_outputs(name, overrides):
  experiment_dict = trainer_helpers.tiny_experiment_dict(task=dict(name=name))
  experiment_dict["model"]["encoder"].update(dropout_rate=0.1, attention_dropout_rate=0.1)
  experiment = experiments.experiment_from_dict(experiment_dict).override(list(overrides))
  task = base.get_task(experiment)
  model = task.build_model()
  inputs = task.model_inputs(next(iter(task.data_loader(experiment.train_data).dataset())))
  training, inference = model(inputs, training=True), model(inputs, training=False)
  return ({k: np.asarray(v) for k, v in training.items()},
          {k: np.asarray(v) for k, v in inference.items()})


def test_every_task_of_the_package_but_distillation_is_checked():
  # Tests register toy tasks of their own in the same process: only the package's count.
  package_tasks = {name for name, cls in base.registered_tasks().items()
                   if cls.__module__.startswith("bert_tf.")}
  assert package_tasks - {"distillation"} == set(TASKS)


@pytest.mark.parametrize("name", TASKS)
def test_with_every_dropout_off_training_outputs_equal_inference_outputs(name):
  training, inference = _training_and_inference_outputs(name, DROPOUT_OFF)
  assert training.keys() == inference.keys()
  for key in training:
    np.testing.assert_array_equal(training[key], inference[key], err_msg=key)


@pytest.mark.parametrize("name", TASKS)
def test_with_dropout_on_training_outputs_differ_from_inference_outputs(name):
  training, inference = _training_and_inference_outputs(name, ())
  assert any(not np.array_equal(training[k], inference[k]) for k in training)


@pytest.mark.parametrize("kept_on", DROPOUT_OFF)
def test_each_of_the_three_settings_is_needed(kept_on):
  overrides = [o for o in DROPOUT_OFF if o != kept_on]
  training, inference = _training_and_inference_outputs("sentence_prediction", overrides)
  assert any(not np.array_equal(training[k], inference[k]) for k in training)
