"""The original release's `bert_config.json` (and Hugging Face's `config.json`): read as
an EncoderConfig, and an EncoderConfig written as one."""

from typing import Any, Dict, Mapping

from bert_tf import configs
from bert_tf.checkpoints.files import ConversionError, read_json

# The files' names of the EncoderConfig fields.
_NAMES = {
    "vocab_size": "vocab_size",
    "hidden_size": "hidden_size",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_attention_heads",
    "intermediate_size": "intermediate_size",
    "hidden_act": "hidden_activation",
    "hidden_dropout_prob": "dropout_rate",
    "attention_probs_dropout_prob": "attention_dropout_rate",
    "max_position_embeddings": "max_position_embeddings",
    "type_vocab_size": "type_vocab_size",
    "initializer_range": "initializer_range",
    "layer_norm_eps": "layer_norm_epsilon",
}
# Activation names of those files mapped to ours ("gelu" is the exact erf form in both).
_ACTIVATIONS = {
    "gelu": "gelu", "gelu_new": "gelu_approximate", "gelu_pytorch_tanh": "gelu_approximate",
    "relu": "relu", "tanh": "tanh",
}
# Ours mapped to the names the original release and transformers both read.
_WRITTEN_ACTIVATIONS = {"gelu": "gelu", "gelu_approximate": "gelu_new", "relu": "relu",
                        "tanh": "tanh"}


def from_bert_config(data: Mapping[str, Any], source: str = "bert_config.json"
                     ) -> configs.EncoderConfig:
  """The EncoderConfig of a `bert_config.json` (or a Hugging Face `config.json`) mapping.

  Keys that do not describe the encoder (`architectures`, `model_type`, ...) are
  ignored; the ones that do are checked like any other config value.

  Raises:
    ConversionError: naming `source` and the field at fault.
  """
  values = {_NAMES[key]: value for key, value in data.items() if key in _NAMES}
  if "hidden_activation" in values:
    act = values["hidden_activation"]
    if act not in _ACTIVATIONS:
      raise ConversionError(f"{source}: unsupported hidden_act '{act}'")
    values["hidden_activation"] = _ACTIVATIONS[act]
  # The original release always used 1e-12, which its config files do not state.
  values.setdefault("layer_norm_epsilon", 1e-12)
  try:
    return configs.EncoderConfig.from_dict(values)
  except configs.ConfigError as e:
    raise ConversionError(f"{source}: {e}") from None


def read_bert_config(path: str) -> configs.EncoderConfig:
  """The EncoderConfig of a `bert_config.json` file (see `from_bert_config`)."""
  return from_bert_config(read_json(path), source=path)


def to_bert_config(config: configs.EncoderConfig) -> Dict[str, Any]:
  """The original release's `bert_config.json` fields of `config`."""
  out = {}
  for json_name, ours in _NAMES.items():
    value = getattr(config, ours)
    out[json_name] = _WRITTEN_ACTIVATIONS[value] if ours == "hidden_activation" else value
  return out
