"""The experiments of official_configs/: each names a model size, and resolves to the
encoder, head and tokenizer settings recorded when they still spelled the encoder out."""

import json
import os

import pytest
import yaml

from bert_tf import configs
from bert_tf.training import experiments
import paths

RECORDED = os.path.join(paths.TESTDATA,
                        "experiment_encoders.json")
SHAPE = ("num_layers", "hidden_size", "num_attention_heads")


def _recorded():
  with open(RECORDED, encoding="utf-8") as f:
    return json.load(f)


def test_every_experiment_is_recorded():
  assert experiments.registered_experiments() == sorted(_recorded())


@pytest.mark.parametrize("name", sorted(_recorded()))
def test_experiment_names_a_size_and_resolves_to_the_recorded_values(name):
  path = experiments.experiment_path(name)
  with open(path, encoding="utf-8") as f:
    encoder = yaml.safe_load(f)["model"]["encoder"]
  assert encoder["size"] in configs.ENCODER_SIZES
  assert not set(SHAPE) & set(encoder), f"{path} spells out the size's shape"
  config = experiments.experiment_from_yaml(path)
  expected = _recorded()[name]
  assert config.model.encoder.as_dict() == expected["encoder"]
  assert config.model.head_dropout_rate == expected["head_dropout_rate"]
  assert config.tokenizer.as_dict() == expected["tokenizer"]


@pytest.mark.parametrize("size", sorted(configs.ENCODER_SIZES))
def test_a_model_file_after_an_experiment_sets_its_size(size):
  config = experiments.resolve_experiment(
      "glue_mrpc", [str(experiments.MODELS_DIR / f"bert_{size}.yaml")])
  assert config.model.encoder == configs.EncoderConfig.from_size(size)
