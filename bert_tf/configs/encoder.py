"""The encoder's config: BERT's hyperparameters and the released sizes (tiny ... large)."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

from bert_tf.configs.base import Config, ConfigError, field_path, nearest_name, require
from bert_tf.constants import ENCODER_SIZES


ACTIVATIONS = ("gelu", "gelu_approximate", "relu", "tanh")


@dataclasses.dataclass
class EncoderConfig(Config):
  """BERT encoder hyperparameters; defaults are BERT-base, uncased vocab."""

  vocab_size: int = 30522
  hidden_size: int = 768
  num_layers: int = 12
  num_attention_heads: int = 12
  # 0 means 4 * hidden_size, as in every released BERT.
  intermediate_size: int = 0
  hidden_activation: str = "gelu"
  dropout_rate: float = 0.1
  attention_dropout_rate: float = 0.1
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  initializer_range: float = 0.02
  layer_norm_epsilon: float = 1e-12

  def __post_init__(self):
    if self.intermediate_size == 0:
      self.intermediate_size = 4 * self.hidden_size
    super().__post_init__()

  def validate(self):
    for name in ("vocab_size", "hidden_size", "num_layers", "num_attention_heads",
                 "intermediate_size", "max_position_embeddings", "type_vocab_size"):
      require(getattr(self, name) > 0, f"{name} must be positive, got {getattr(self, name)}")
    require(self.hidden_size % self.num_attention_heads == 0,
            f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
            f"({self.num_attention_heads})")
    for name in ("dropout_rate", "attention_dropout_rate"):
      value = getattr(self, name)
      require(0.0 <= value < 1.0, f"{name} must be in [0, 1), got {value}")
    require(self.initializer_range > 0, "initializer_range must be positive")
    require(self.layer_norm_epsilon > 0, "layer_norm_epsilon must be positive")
    require(self.hidden_activation in ACTIVATIONS,
            f"hidden_activation must be one of {ACTIVATIONS}, got '{self.hidden_activation}'")

  @property
  def head_size(self) -> int:
    return self.hidden_size // self.num_attention_heads

  @classmethod
  def from_dict(cls, data: Optional[Mapping[str, Any]], path: str = ""):
    """Builds an encoder config; a `size` key names a released size (ENCODER_SIZES)
    whose layers, width and heads the other keys of `data` then override."""
    data = dict(data or {})
    if "size" in data:
      size = data.pop("size")
      if not isinstance(size, str) or size not in ENCODER_SIZES:
        nearest = nearest_name(str(size), list(ENCODER_SIZES))
        raise ConfigError(f"{field_path(path, 'size')}: unknown encoder size '{size}'; "
                          f"did you mean '{nearest}'? Sizes: {', '.join(ENCODER_SIZES)}")
      layers, hidden, heads = ENCODER_SIZES[size]
      data = {"num_layers": layers, "hidden_size": hidden, "num_attention_heads": heads,
              **data}
    return super().from_dict(data, path)

  @classmethod
  def from_size(cls, size: str, **overrides) -> "EncoderConfig":
    """Returns the config of a released size: tiny, mini, small, medium, base, large."""
    return cls.from_dict(dict(overrides, size=size))
