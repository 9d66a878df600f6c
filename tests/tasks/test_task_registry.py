"""The task registry and protocol: every task's config, unknown names, declared formats,
and a task added by one module (here, this test module) as CONTRIBUTING.md's recipe
"Adding a task" says, under names of this module's own: its config (a tuple among its
settings) round-trips YAML, it trains on both engines and exports."""

import dataclasses
import json
import os
import subprocess
import sys
from typing import Tuple

import keras
import numpy as np
import pytest
import tensorflow as tf

import export_helpers
import paths
import registry_names
from bert_tf import configs
from bert_tf.export import exporter
from bert_tf.export import serving_module
from bert_tf.models.bert_classifier import LOGITS, BertClassifier
from bert_tf.tasks import base
from bert_tf.training import experiments
from bert_tf.training import trainer as trainer_lib
from bert_tf.training.trainer import Trainer

SCORE = "score"
TOY = registry_names.local_name("toy_score", __file__)


# ----- a toy task and its serving piece, registered by this module alone -----
@dataclasses.dataclass
class ToyScoreConfig(configs.TaskConfig):
  """Regresses a score from the [CLS] vector."""

  name: str = TOY
  target: float = 0.5
  # Scales of the error, summed: a tuple setting, written to YAML as a list.
  weights: Tuple[float, ...] = (1.0,)


@base.register_task(TOY, ToyScoreConfig)
class ToyScoreTask(base.Task):
  """Squared error between one output and task.target, weighted by sum(task.weights);
  reads sentence records (their regression labels unused)."""

  record_kind = "sentence"
  export_kind = TOY
  regression = True

  def build_model(self):
    return BertClassifier(self.build_encoder(), 1, dropout_rate=0.0, name="toy_scorer")

  def compute_loss(self, features, outputs, global_batch_size):
    score = keras.ops.cast(outputs[LOGITS][:, 0], "float32")
    error = sum(self.config.weights) * keras.ops.square(score - self.config.target)
    return {"loss": keras.ops.sum(error) / keras.ops.cast(global_batch_size, "float32")}

  def serving_options(self, data_config):
    return {"offset": -self.config.target}


@serving_module.register_serving(TOY)
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
  # TOY's among them: its tuple setting comes back a tuple.
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


def test_a_tuple_setting_round_trips_yaml_as_a_tuple(tmp_path):
  experiment = experiments.experiment_from_dict(
      {"task": {"name": TOY, "weights": [0.5, 1.5]}})
  assert experiment.task.weights == (0.5, 1.5)
  path = str(tmp_path / "params.yaml")
  experiment.save(path)
  assert experiments.experiment_from_yaml(path).task.weights == (0.5, 1.5)
  with pytest.raises(configs.ConfigError, match=r"task\.weights\[1\] must be a number"):
    experiments.experiment_from_dict({"task": {"name": TOY, "weights": [1.0, "x"]}})


def _toy_experiment(tmp_path):
  vocab = export_helpers.write_vocab(tmp_path)
  return export_helpers.experiment(vocab, {"name": TOY, "target": 2.0}).override(
      {"train_data": {"format": "dummy", "global_batch_size": 4},
       "optimizer": {"learning_rate": 1e-2, "warmup_steps": 0},
       "trainer": {"train_steps": 1, "steps_per_loop": 1}})


def test_the_added_task_reads_its_input_computes_its_loss_and_serves(tmp_path):
  experiment = _toy_experiment(tmp_path)
  task = base.get_task(experiment)
  model = task.build_model()
  assert model.encoder.kernels is task.kernels  # built by build_encoder()
  batch = next(iter(task.data_loader(experiment.train_data).dataset()))
  outputs = model(task.model_inputs(batch), training=False)
  loss = float(task.compute_loss(batch, outputs, 4)["loss"])
  want = np.sum((np.asarray(outputs[LOGITS])[:, 0] - 2.0) ** 2) / 4
  np.testing.assert_allclose(loss, want, rtol=1e-5)
  module = exporter.build_serving_module(experiment, model, experiment.tokenizer.vocab_file)
  texts = tf.constant(["the cat sat"])
  served = module.predict_text({"text": texts})[SCORE]
  direct = model(module.encode_text({"text": texts}), training=False)[LOGITS][:, 0]
  np.testing.assert_allclose(served.numpy(), direct.numpy() - 2.0, rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # a training in a JAX process
def test_the_task_added_by_one_module_trains_on_jax(tmp_path):
  path = str(tmp_path / "toy.yaml")
  _toy_experiment(tmp_path).save(path)
  env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
  env.update(KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=os.pathsep.join(
      [paths.ROOT, os.path.join(paths.ROOT, "tests")]))
  result = subprocess.run([sys.executable, os.path.abspath(__file__), path,
                           str(tmp_path / "model")], env=env, capture_output=True, text=True,
                          timeout=900, cwd=paths.ROOT)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  line = [l for l in result.stdout.splitlines() if l.startswith("RESULT ")][-1]
  metrics = json.loads(line[len("RESULT "):])
  assert metrics["backend"] == "jax" and np.isfinite(metrics["loss"])


@pytest.mark.slow  # a training and an export
def test_a_task_added_by_one_module_trains_and_exports(tmp_path):
  vocab = export_helpers.write_vocab(tmp_path)
  experiment = _toy_experiment(tmp_path)
  trainer = Trainer(experiment, str(tmp_path / "model"))
  before = [v.numpy().copy() for v in trainer.model.trainable_variables]
  report = trainer.train()
  assert np.isfinite(report["loss"]) and trainer.step == 1
  assert any(not np.allclose(a, v.numpy())
             for a, v in zip(before, trainer.model.trainable_variables))

  assert TOY in exporter.kinds()
  module = exporter.build_serving_module(experiment, trainer.model, vocab)
  assert isinstance(module, ToyScoreServing) and module.offset == -2.0
  path = exporter.write_saved_model(module, str(tmp_path / "export"))
  served = tf.saved_model.load(path).signatures["serving_default"](
      text=tf.constant(["the cat sat", "hello world"]))
  direct = module.predict_text({"text": tf.constant(["the cat sat", "hello world"])})
  np.testing.assert_allclose(served[SCORE].numpy(), direct[SCORE].numpy(), rtol=1e-5)


if __name__ == "__main__":
  metrics = trainer_lib.run_experiment(experiments.experiment_from_yaml(sys.argv[1]),
                                       sys.argv[2], "train")
  print("RESULT " + json.dumps(dict(metrics, backend=keras.backend.backend())), flush=True)
