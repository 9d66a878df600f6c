"""Float8 training (runtime.float8_training, bert_tf.models.float8): the setting, which
layers it converts, its scaling state in training and in checkpoints, and its refusals.

The JAX side runs in a subprocess (tests/models/float8_worker.py): this process runs
Keras on TensorFlow.
"""

import logging
import os
import sys

import pytest

import trainer_helpers
from bert_tf import configs
from bert_tf.models import float8
from bert_tf.tasks import base
from bert_tf.training import trained_model

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import float8_worker  # pylint: disable=g-import-not-at-top,wrong-import-position

BLOCK_PROJECTIONS = ("attention/query", "attention/key", "attention/value",
                     "attention/output", "intermediate", "output")


def test_float8_training_is_off_by_default_and_set_by_an_override():
  assert configs.RuntimeConfig().float8_training is False
  experiment = trainer_helpers.tiny_experiment().override(["runtime.float8_training=true"])
  assert experiment.runtime.float8_training is True


def test_float8_with_lora_is_a_config_error():
  with pytest.raises(configs.ConfigError, match="float8_training does not combine with"):
    trainer_helpers.tiny_experiment(model={"lora_rank": 2},
                                    runtime={"float8_training": True})


def test_tensorflow_backend_refuses_float8_training_in_one_line():
  task = base.get_task(trainer_helpers.tiny_experiment(runtime={"float8_training": True}))
  with pytest.raises(configs.ConfigError) as error:
    trained_model.build(task)
  message = str(error.value)
  assert "JAX backend only" in message and "tensorflow" in message
  assert "\n" not in message


def test_exports_build_the_plain_model_of_a_float8_run():
  experiment = trained_model.load_experiment(
      trainer_helpers.tiny_experiment(runtime={"float8_training": True}))
  assert experiment.runtime.float8_training is False
  model = trained_model.build(base.get_task(experiment))
  assert {w.path.rsplit("/", 1)[-1] for w in model.weights}.isdisjoint({"inputs_scale"})


def test_float8_on_a_cpu_says_in_one_warning_line_that_it_is_emulated(monkeypatch, caplog):
  # The conversion itself runs on any backend; only the setting is JAX's.
  monkeypatch.setattr(float8, "check_supported", lambda model: None)
  model = base.get_task(trainer_helpers.tiny_experiment()).build_model()
  with caplog.at_level(logging.WARNING):
    float8.enable(model)
  (message,) = [r.getMessage() for r in caplog.records if "float8" in r.getMessage()]
  assert "runtime.float8_training on CPU is emulated" in message
  assert "\n" not in message
  assert float8.emulation_note(["gpu:0", "gpu:1"]) is None
  assert float8.emulation_note(["tpu:0"]) is None


@pytest.mark.slow
def test_float8_converts_every_block_projection_and_trains_their_scales(tmp_path):
  result = float8_worker.run("convert", tmp_path)
  float8 = sorted(path for path, mode in result["dense"].items() if mode == "float8")
  assert float8 == sorted(f"transformer_layer_{i}/{p}" for i in range(2)
                          for p in BLOCK_PROJECTIONS)
  # The pooler and the heads keep the policy (the tied masked-LM output layer is no
  # Dense layer at all).
  assert {p: m for p, m in result["dense"].items() if m is None} == {
      "pooler": None, "masked_lm/transform": None, "next_sentence/dense": None}
  assert len(result["converted"]) == 12
  assert result["added_variables"] == 12 * 6
  assert result["policy"] == "float8_from_mixed_bfloat16"
  assert result["kernel_changed"]
  scaling = result["scaling"]
  # Delayed scaling: the histories record the amax of the step, and the scales follow
  # them (e4m3 max 448 for inputs and kernel).
  assert scaling["inputs_amax_history"][0] > 0
  assert scaling["inputs_scale"][0] == pytest.approx(
      scaling["inputs_amax_history"][0] / 448, rel=1e-5)
  assert scaling["kernel_scale"][0] == pytest.approx(
      scaling["kernel_amax_history"][0] / 448, rel=1e-5)
  assert 0 < scaling["outputs_grad_scale"][0] < 1


@pytest.mark.slow  # Two trainings and three models built on JAX, in one subprocess.
def test_float8_checkpoints_load_into_plain_models_and_plain_ones_warm_start_float8(
    tmp_path):
  result = float8_worker.run("checkpoints", tmp_path)
  # A float8 run's encoder: the plain model's variables, the same values, plus the six
  # scaling variables of each of the 12 converted layers.
  assert result["float8_into_plain"] == 0.0
  assert len(result["extra_in_float8_checkpoint"]) == 12 * 6
  assert result["float8_amax_trained"] > 0
  # A plain checkpoint warm-starts a float8 model: the weights restored, the scaling
  # state at its initial values, the warm start reported as usual.
  assert result["plain_into_float8"] == 0.0
  assert result["warm_start_float8"]
  assert len(result["left_at_initial_value"]) == 6
  assert result["initial_scales"] == [1.0]
  assert list(result["warm_start_reported"]) == ["encoder"]
