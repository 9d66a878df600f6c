"""The task registry and protocol: every task's config, unknown names, declared formats,
and a task added by one module (here, this test module) that trains and exports."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

import export_helpers
from bert_tf import configs
from bert_tf import constants
from bert_tf.data.pipelines import loaders
from bert_tf.export import exporter
from bert_tf.export import serving_module
from bert_tf.models.bert_classifier import LOGITS, BertClassifier
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.tasks import base
from bert_tf.training import experiments
from bert_tf.training.trainer import Trainer

SCORE = "score"


# ----- a toy task and its serving piece, registered by this module alone -----
@dataclasses.dataclass
class ToyScoreConfig(configs.TaskConfig):
  """Regresses a score from the [CLS] vector."""

  name: str = "toy_score"
  target: float = 0.5


class ToyScoreLoader(loaders.DataLoader):
  """One synthetic batch of encoder inputs, repeated."""

  def dataset(self, input_context=None, start=0):
    data_config = self.data_config
    batch = data_config.global_batch_size
    ids = np.random.default_rng(0).integers(
        5, self.needs.vocab_size, [batch, data_config.seq_length])
    features = {constants.INPUT_WORD_IDS: ids.astype(np.int32),
                constants.INPUT_MASK: np.ones_like(ids, np.int32),
                constants.INPUT_TYPE_IDS: np.zeros_like(ids, np.int32)}
    return tf.data.Dataset.from_tensors(features).repeat()


class ToyScoreRecords(loaders.RecordKind):
  """Encoder inputs only, synthetic."""

  name = "toy_score"
  formats = {loaders.DUMMY: ToyScoreLoader}


loaders.register_kind(ToyScoreRecords())


@base.register_task("toy_score", ToyScoreConfig)
class ToyScoreTask(base.Task):
  """Squared error between one output and task.target."""

  record_kind = "toy_score"
  export_kind = "toy_score"
  regression = True

  def build_model(self):
    encoder = BertEncoder.from_config_object(self.experiment.model.encoder)
    return BertClassifier(encoder, 1, dropout_rate=0.0, name="toy_scorer")

  def compute_loss(self, features, outputs, global_batch_size):
    error = tf.math.squared_difference(outputs[LOGITS][:, 0], self.config.target)
    return {"loss": tf.reduce_sum(error) / tf.cast(global_batch_size, tf.float32)}

  def serving_options(self, data_config):
    return {"offset": -self.config.target}


@serving_module.register_serving("toy_score")
class ToyScoreServing(serving_module.ServingModule):
  """score float32 [B]: the model's output plus `offset`."""

  def __init__(self, model, text_encoder, offset=0.0, name="toy_score_serving"):
    super().__init__(model, text_encoder, name=name)
    self.offset = offset

  def predict_token_ids(self, inputs):
    return {SCORE: self.call_model(inputs)[LOGITS][:, 0] + self.offset}


# ----- tests -----
@pytest.mark.parametrize("name", sorted(base.registered_tasks()))
def test_every_registered_task_has_its_config_class_and_round_trips_yaml(name, tmp_path):
  config_cls = base.task_configs()[name]
  assert issubclass(config_cls, configs.TaskConfig) and config_cls.name == name
  experiment = experiments.experiment_from_dict({"task": {"name": name}})
  assert type(experiment.task) is config_cls
  path = str(tmp_path / "params.yaml")
  experiment.save(path)
  assert experiments.experiment_from_yaml(path) == experiment
  assert isinstance(base.get_task(experiment), base.registered_tasks()[name])


def test_unknown_task_name_names_the_nearest_task():
  with pytest.raises(configs.ConfigError,
                     match=r"task\.name: unknown task 'squda'; did you mean 'squad'\?"):
    experiments.experiment_from_dict({"task": {"name": "squda"}})
  with pytest.raises(configs.ConfigError, match="unknown task 'taging'.*'tagging'"):
    experiments.experiment_from_dict({"task": {"name": "squad"}}).override(
        "task.name=taging", task_configs=base.task_configs())


def test_a_format_outside_the_declared_ones_is_one_error_naming_the_section():
  experiment = experiments.experiment_from_dict({
      "task": {"name": "tagging"}, "train_data": {"format": "tsv"},
      "eval_data": {"format": "swag_csv", "is_training": False}})
  task = base.get_task(experiment)
  with pytest.raises(configs.ConfigError, match=r"^train_data\.format: task 'tagging' reads "
                     r"formats dummy, tfrecord, conll; got 'tsv'$"):
    task.data_loader(experiment.train_data).dataset()
  with pytest.raises(configs.ConfigError, match=r"^eval_data\.format: .*got 'swag_csv'$"):
    task.data_loader(experiment.eval_data).dataset()


@pytest.mark.slow  # a training and an export
def test_a_task_added_by_one_module_trains_and_exports(tmp_path):
  vocab = export_helpers.write_vocab(tmp_path)
  experiment = export_helpers.experiment(vocab, {"name": "toy_score", "target": 2.0}).override(
      {"train_data": {"format": "dummy", "global_batch_size": 4},
       "optimizer": {"learning_rate": 1e-2, "warmup_steps": 0},
       "trainer": {"train_steps": 1, "steps_per_loop": 1}})
  trainer = Trainer(experiment, str(tmp_path / "model"))
  before = [v.numpy().copy() for v in trainer.model.trainable_variables]
  report = trainer.train()
  assert np.isfinite(report["loss"]) and trainer.step == 1
  assert any(not np.allclose(a, v.numpy())
             for a, v in zip(before, trainer.model.trainable_variables))

  assert "toy_score" in exporter.kinds()
  module = exporter.build_serving_module(experiment, trainer.model, vocab)
  assert isinstance(module, ToyScoreServing) and module.offset == -2.0
  path = exporter.write_saved_model(module, str(tmp_path / "export"))
  served = tf.saved_model.load(path).signatures["serving_default"](
      text=tf.constant(["the cat sat", "hello world"]))
  direct = module.predict_text({"text": tf.constant(["the cat sat", "hello world"])})
  np.testing.assert_allclose(served[SCORE].numpy(), direct[SCORE].numpy(), rtol=1e-5)
