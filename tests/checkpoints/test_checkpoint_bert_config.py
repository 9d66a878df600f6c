"""bert_config.json <-> EncoderConfig: the original release's names, both ways."""

import json

import pytest

from bert_tf import configs
from bert_tf.checkpoints import bert_config
from bert_tf.checkpoints.files import ConversionError


def test_reads_original_bert_config_json(tmp_path):
  original = {
      "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
      "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
      "max_position_embeddings": 512, "num_attention_heads": 12, "num_hidden_layers": 12,
      "type_vocab_size": 2, "vocab_size": 30522}
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps(original))
  c = bert_config.read_bert_config(str(path))
  assert c == configs.EncoderConfig.from_size("base")
  assert bert_config.to_bert_config(c) == {**original, "layer_norm_eps": 1e-12}


def test_bert_config_json_errors_name_the_file(tmp_path):
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps({"hidden_size": 100, "num_attention_heads": 12}))
  with pytest.raises(ConversionError, match="bert_config.json.*divisible"):
    bert_config.read_bert_config(str(path))
  path.write_text("{not json")
  with pytest.raises(ConversionError, match="Cannot parse .*bert_config.json"):
    bert_config.read_bert_config(str(path))


def test_hugging_face_activation_names_read_as_ours_and_unknown_ones_are_an_error():
  assert bert_config.from_bert_config(
      {"hidden_act": "gelu_pytorch_tanh"}).hidden_activation == "gelu_approximate"
  with pytest.raises(ConversionError, match="config.json: unsupported hidden_act 'swish'"):
    bert_config.from_bert_config({"hidden_act": "swish"}, source="config.json")
