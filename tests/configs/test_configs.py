"""Configs: sizes, validation errors, overrides, round trips."""

import dataclasses
import json

import pytest

from bert_tf import configs


@pytest.mark.parametrize("size,layers,hidden,heads", [
    ("tiny", 2, 128, 2), ("mini", 4, 256, 4), ("small", 4, 512, 8), ("medium", 8, 512, 8),
    ("base", 12, 768, 12), ("large", 24, 1024, 16)])
def test_named_sizes_have_the_released_shapes(size, layers, hidden, heads):
  c = configs.EncoderConfig.from_size(size)
  assert (c.num_layers, c.hidden_size, c.num_attention_heads) == (layers, hidden, heads)
  assert c.intermediate_size == 4 * hidden
  assert (c.vocab_size, c.max_position_embeddings, c.type_vocab_size) == (30522, 512, 2)
  assert (c.dropout_rate, c.attention_dropout_rate, c.initializer_range) == (0.1, 0.1, 0.02)
  assert c.layer_norm_epsilon == 1e-12 and c.hidden_activation == "gelu"


def test_unknown_key_error_names_key_and_nearest_valid_one():
  with pytest.raises(configs.ConfigError, match=r"trainer\.train_step'.*trainer\.train_steps"):
    configs.ExperimentConfig().override(["trainer.train_step=5"])
  with pytest.raises(configs.ConfigError, match=r"model\.encoder\.num_layer'.*num_layers"):
    configs.ExperimentConfig.from_dict({"model": {"encoder": {"num_layer": 2}}})


def test_wrong_type_error_names_the_field():
  with pytest.raises(configs.ConfigError, match=r"trainer\.train_steps must be an integer"):
    configs.ExperimentConfig().override("trainer.train_steps=many")
  with pytest.raises(configs.ConfigError, match=r"runtime\.jit_compile must be true or false"):
    configs.ExperimentConfig().override({"runtime": {"jit_compile": "yes"}})


def test_impossible_value_error_names_the_field():
  with pytest.raises(configs.ConfigError,
                     match=r"hidden_size \(100\) must be divisible by num_attention_heads"):
    configs.ExperimentConfig().override("model.encoder.hidden_size=100")
  with pytest.raises(configs.ConfigError, match="dropout_rate must be in"):
    configs.EncoderConfig(dropout_rate=1.5)
  with pytest.raises(configs.ConfigError, match="seq_length"):
    configs.ExperimentConfig().override("train_data.seq_length=1024")


def test_dotted_overrides_apply_nested_values_and_lists():
  c = configs.ExperimentConfig().override(
      "trainer.train_steps=1000,optimizer.exclude_from_weight_decay=[bias, gamma],"
      "optimizer.learning_rate=2e-5")
  assert c.trainer.train_steps == 1000
  assert c.optimizer.exclude_from_weight_decay == ["bias", "gamma"]
  assert c.optimizer.learning_rate == 2e-5


def test_config_round_trips_through_yaml_and_json(tmp_path):
  c = configs.ExperimentConfig().override("model.encoder.num_layers=3,trainer.train_steps=7")
  path = str(tmp_path / "params.yaml")
  c.save(path)
  known = {c.task.name: type(c.task)}
  assert configs.ExperimentConfig.from_yaml(path, task_configs=known) == c
  assert configs.ExperimentConfig.from_dict(json.loads(c.to_json()), task_configs=known) == c


def test_later_yaml_files_override_earlier_ones(tmp_path):
  a = tmp_path / "a.yaml"
  a.write_text("model:\n  encoder:\n    num_layers: 2\n    hidden_size: 64\n    num_attention_heads: 2\n")
  b = tmp_path / "b.yaml"
  b.write_text("model:\n  encoder:\n    num_layers: 3\n")
  c = configs.ExperimentConfig.from_yaml(str(a), str(b), overrides=["trainer.train_steps=9"])
  assert (c.model.encoder.num_layers, c.model.encoder.hidden_size) == (3, 64)
  assert c.model.encoder.intermediate_size == 256  # Omitted: 4 x hidden.
  assert c.trainer.train_steps == 9


def test_yaml_error_names_the_file(tmp_path):
  bad = tmp_path / "bad.yaml"
  bad.write_text("model: [unclosed\n")
  with pytest.raises(configs.ConfigError, match="bad.yaml"):
    configs.ExperimentConfig.from_yaml(str(bad))




def test_unknown_task_name_is_an_error_with_suggestion():
  with pytest.raises(configs.ConfigError, match="unknown task 'pretrainin'.*pretraining"):
    configs.ExperimentConfig().override("task.name=pretrainin")


@dataclasses.dataclass
class _ToyTaskConfig(configs.TaskConfig):
  name: str = "toy"
  width: int = 3


def test_task_section_is_read_with_the_callers_task_configs():
  toy = {"toy": _ToyTaskConfig}
  c = configs.ExperimentConfig.from_dict({"task": {"name": "toy", "width": 5}},
                                         task_configs=toy)
  assert type(c.task) is _ToyTaskConfig and c.task.width == 5
  # Overriding other fields keeps the task's class without the mapping.
  assert c.override("trainer.train_steps=3").task == c.task
  with pytest.raises(configs.ConfigError, match=r"task\.width must be an integer"):
    c.override("task.width=wide")
  with pytest.raises(configs.ConfigError, match=r"task\.name: unknown task 'toi'; did you mean "
                     r"'toy'\? Tasks: toy"):
    configs.ExperimentConfig.from_dict({"task": {"name": "toi"}}, task_configs=toy)
  with pytest.raises(configs.ConfigError, match="No task configs were given"):
    configs.ExperimentConfig.from_dict({"task": {"name": "toy"}})




def test_a_size_gives_the_encoder_shape_and_other_keys_override_it():
  c = configs.ExperimentConfig.from_dict(
      {"model": {"encoder": {"size": "mini", "vocab_size": 100, "num_layers": 2}}})
  assert (c.model.encoder.num_layers, c.model.encoder.hidden_size,
          c.model.encoder.num_attention_heads) == (2, 256, 4)
  assert (c.model.encoder.vocab_size, c.model.encoder.intermediate_size) == (100, 1024)
  assert configs.EncoderConfig.from_size("small", vocab_size=100) == configs.EncoderConfig.from_dict(
      {"size": "small", "vocab_size": 100})
  with pytest.raises(configs.ConfigError, match=r"model\.encoder\.size: unknown encoder size "
                     r"'bse'; did you mean 'base'"):
    configs.ExperimentConfig.from_dict({"model": {"encoder": {"size": "bse"}}})


def test_overriding_the_size_starts_from_that_size_and_field_overrides_keep_it(tmp_path):
  path = tmp_path / "exp.yaml"
  path.write_text("model:\n  encoder:\n    size: tiny\n    max_position_embeddings: 64\n"
                  "train_data:\n  seq_length: 64\neval_data:\n  seq_length: 64\n")
  c = configs.ExperimentConfig.from_yaml(str(path), overrides="model.encoder.vocab_size=99")
  assert (c.model.encoder.num_layers, c.model.encoder.max_position_embeddings,
          c.model.encoder.vocab_size) == (2, 64, 99)
  larger = c.override("model.encoder.size=small")
  assert (larger.model.encoder.num_layers, larger.model.encoder.hidden_size,
          larger.model.encoder.max_position_embeddings) == (4, 512, 512)
  bigger = configs.ExperimentConfig.from_yaml(str(path), overrides="model.encoder.size=mini")
  assert bigger.model.encoder.hidden_size == 256
  # The resolved encoder is what a config writes (params.yaml), and reads back the same.
  assert "size" not in c.as_dict()["model"]["encoder"]
  assert configs.ExperimentConfig.from_dict(c.as_dict(),
                                           task_configs={c.task.name: type(c.task)}) == c


def test_the_tokenizer_is_one_section_for_training_evaluation_and_export():
  c = configs.ExperimentConfig.from_dict(
      {"tokenizer": {"vocab_file": "vocab.txt", "lower_case": False}})
  assert (c.tokenizer.vocab_file, c.tokenizer.lower_case) == ("vocab.txt", False)
  assert not hasattr(c.train_data, "vocab_file") and not hasattr(c.eval_data, "lower_case")
  assert c.override("tokenizer.vocab_file=other.txt").tokenizer.vocab_file == "other.txt"
