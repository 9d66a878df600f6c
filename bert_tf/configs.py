"""Typed, validated experiment configuration.

Configs are dataclasses. They load from dicts and YAML files, take dotted overrides
(`trainer.train_steps=1000`) and check every value on the way in: an unknown key is an
error naming the key and the nearest valid one, and a wrong type or an impossible value
is an error naming the field.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import os
import types
import typing
import warnings
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Sequence, Union

import yaml

from bert_tf.utils import errors


class ConfigError(errors.UserError, ValueError):
  """A configuration value is unknown, mistyped or impossible."""


def _field_path(prefix: str, name: str) -> str:
  return f"{prefix}.{name}" if prefix else name


def nearest_name(name: str, choices: Sequence[str]) -> str:
  """The choice most similar to `name` (for "did you mean" hints); "" when none."""
  matches = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.0)
  return matches[0] if matches else ""


def _unknown_key_error(path: str, key: str, valid: Sequence[str]) -> ConfigError:
  nearest = nearest_name(key, valid)
  hint = f"; did you mean '{_field_path(path, nearest)}'?" if nearest else ""
  return ConfigError(f"Unknown config key '{_field_path(path, key)}'{hint} "
                     f"Valid keys here: {', '.join(sorted(valid))}.")


@dataclasses.dataclass
class Config:
  """Base class of every config: strict loading, overrides, serialization."""

  def __post_init__(self):
    self.validate()

  def validate(self) -> None:
    """Raises ConfigError when values are impossible. Subclasses extend this."""

  # ----- conversion -----
  def as_dict(self) -> Dict[str, Any]:
    """Returns a plain nested dict of builtins (YAML and JSON friendly)."""
    out = {}
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      out[field.name] = _to_builtin(value)
    return out

  @classmethod
  def from_dict(cls, data: Optional[Mapping[str, Any]], path: str = ""):
    """Builds a config from a nested mapping, checking keys and types.

    Args:
      data: nested mapping; missing keys keep their defaults.
      path: dotted prefix used in error messages.

    Raises:
      ConfigError: naming the offending key or field.
    """
    data = dict(data or {})
    field_map = {f.name: f for f in dataclasses.fields(cls) if f.init}
    for key in data:
      if key not in field_map:
        raise _unknown_key_error(path, key, list(field_map))
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, value in data.items():
      kwargs[name] = _coerce(value, hints[name], _field_path(path, name))
    try:
      return cls(**kwargs)
    except ConfigError as e:
      if path and not str(e).startswith(path):
        raise ConfigError(f"{path}: {e}") from None
      raise

  def replace(self, **changes):
    """Returns a copy with `changes` applied and validated."""
    merged = self.as_dict()
    merged.update({k: _to_builtin(v) for k, v in changes.items()})
    return self._reparse(merged)

  def override(self, overrides: Union[Mapping[str, Any], Sequence[str], str, None],
               **parse_args):
    """Returns a copy with overrides applied.

    Args:
      overrides: a nested mapping, or strings `a.b.c=value` (a list, or one string with
        comma-separated items). Values are parsed as YAML scalars (`1000`, `true`,
        `1e-4`, `[a, b]`).
      **parse_args: passed to from_dict (ExperimentConfig: task_configs).
    """
    if not overrides:
      return self
    if isinstance(overrides, Mapping):
      nested = dict(overrides)
    else:
      nested = parse_dotted_overrides(overrides)
    merged = _deep_merge(self.as_dict(), nested)
    return self._reparse(merged, **parse_args)

  def _reparse(self, merged: Mapping[str, Any], **parse_args):
    """A config of this class from the merged dict of this one and some changes."""
    return type(self).from_dict(merged, **parse_args)

  # ----- files -----
  def to_yaml(self) -> str:
    return yaml.safe_dump(self.as_dict(), sort_keys=False)

  def to_json(self) -> str:
    return json.dumps(self.as_dict(), indent=2)

  def save(self, path: str) -> None:
    """Writes the config as YAML, atomically."""
    # Local import: configs load without TensorFlow, which the writer needs.
    from bert_tf.utils import files  # pylint: disable=g-import-not-at-top
    with files.atomic_open(path) as f:
      f.write(self.to_yaml())

  @classmethod
  def from_yaml(cls, *paths: str, overrides=None, **parse_args):
    """Loads YAML files in order (later ones override earlier), then overrides.

    `parse_args` go to from_dict (ExperimentConfig: task_configs).
    """
    merged: Dict[str, Any] = {}
    for p in paths:
      merged = _deep_merge(merged, load_yaml(p))
    # Overrides join before validation, so that they can fix what the files leave
    # inconsistent (a short max_position_embeddings and a long seq_length, say).
    if overrides:
      nested = (dict(overrides) if isinstance(overrides, Mapping)
                else parse_dotted_overrides(overrides))
      merged = _deep_merge(merged, nested)
    return cls.from_dict(merged, **parse_args)


def load_yaml(path: str) -> Dict[str, Any]:
  """Reads one YAML mapping, with the file name in any error."""
  if not os.path.exists(path):
    raise ConfigError(f"Config file not found: {path}")
  with open(path, encoding="utf-8") as f:
    try:
      data = yaml.safe_load(f)
    except yaml.YAMLError as e:
      raise ConfigError(f"Cannot parse YAML config {path}: {e}") from None
  if data is None:
    return {}
  if not isinstance(data, dict):
    raise ConfigError(f"Config file {path} must hold a mapping, got {type(data).__name__}")
  return data


def parse_dotted_overrides(overrides: Union[Sequence[str], str]) -> Dict[str, Any]:
  """Turns ['a.b=1', 'c=x'] (or 'a.b=1,c=x') into {'a': {'b': 1}, 'c': 'x'}."""
  if isinstance(overrides, str):
    items = _split_top_level_commas(overrides)
  else:
    items = []
    for item in overrides:
      items.extend(_split_top_level_commas(item))
  nested: Dict[str, Any] = {}
  for item in items:
    item = item.strip()
    if not item:
      continue
    if "=" not in item:
      raise ConfigError(f"Override '{item}' must look like key.sub=value")
    key, raw = item.split("=", 1)
    value = yaml.safe_load(raw) if raw.strip() else ""
    node = nested
    parts = key.strip().split(".")
    for part in parts[:-1]:
      node = node.setdefault(part, {})
      if not isinstance(node, dict):
        raise ConfigError(f"Override '{item}' conflicts with an earlier override")
    node[parts[-1]] = value
  return nested


def _split_top_level_commas(text: str) -> List[str]:
  """Splits on commas that are not inside brackets, so `a=[1,2],b=3` works."""
  parts, depth, start = [], 0, 0
  for i, ch in enumerate(text):
    if ch in "[{(":
      depth += 1
    elif ch in "]})":
      depth -= 1
    elif ch == "," and depth == 0:
      parts.append(text[start:i])
      start = i + 1
  parts.append(text[start:])
  return parts


def _deep_merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> Dict[str, Any]:
  out = copy.deepcopy(dict(base))
  for key, value in update.items():
    if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
      # A task config changing its name starts from that task's defaults.
      if key == "task" and "name" in value and value["name"] != out[key].get("name"):
        out[key] = copy.deepcopy(dict(value))
      # So does an encoder changing its size: the size's values, then the update's.
      elif key == "encoder" and "size" in value and value["size"] != out[key].get("size"):
        out[key] = copy.deepcopy(dict(value))
      else:
        out[key] = _deep_merge(out[key], value)
    else:
      out[key] = copy.deepcopy(value)
  return out


def _to_builtin(value):
  if isinstance(value, Config):
    return value.as_dict()
  if isinstance(value, (list, tuple)):
    return [_to_builtin(v) for v in value]
  if isinstance(value, dict):
    return {k: _to_builtin(v) for k, v in value.items()}
  return value


def _type_name(tp) -> str:
  return getattr(tp, "__name__", str(tp))


def _coerce(value, tp, path: str):
  """Checks `value` against the annotation `tp`, converting where lossless."""
  origin = typing.get_origin(tp)
  args = typing.get_args(tp)
  if origin in (Union, types.UnionType):
    if value is None and type(None) in args:
      return None
    problems = []
    for arg in args:
      if arg is type(None):
        continue
      try:
        return _coerce(value, arg, path)
      except ConfigError as e:
        problems.append(str(e))
    raise ConfigError(problems[0] if problems else f"{path}: invalid value {value!r}")
  if tp is Any:
    return value
  if isinstance(tp, type) and issubclass(tp, Config):
    if isinstance(value, tp):
      return value
    if not isinstance(value, Mapping):
      raise ConfigError(f"{path} must be a mapping of {tp.__name__} fields, got {value!r}")
    return tp.from_dict(value, path)
  if origin in (list, List, tuple, Sequence):
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
      raise ConfigError(f"{path} must be a list, got {value!r}")
    item_type = args[0] if args else Any
    return [_coerce(v, item_type, f"{path}[{i}]") for i, v in enumerate(value)]
  if origin in (dict, Dict, Mapping):
    if not isinstance(value, Mapping):
      raise ConfigError(f"{path} must be a mapping, got {value!r}")
    return dict(value)
  if tp is bool:
    if isinstance(value, bool):
      return value
    raise ConfigError(f"{path} must be true or false, got {value!r}")
  if tp is int:
    if isinstance(value, bool) or not isinstance(value, int):
      if isinstance(value, float) and value.is_integer():
        return int(value)
      raise ConfigError(f"{path} must be an integer, got {value!r}")
    return value
  if tp is float:
    if isinstance(value, str):
      # PyYAML (YAML 1.1) reads `1e-4` as a string; it is meant as a number.
      try:
        return float(value)
      except ValueError:
        pass
    if isinstance(value, bool) or not isinstance(value, (int, float)):
      raise ConfigError(f"{path} must be a number, got {value!r}")
    return float(value)
  if tp is str:
    if not isinstance(value, str):
      raise ConfigError(f"{path} must be a string, got {value!r}")
    return value
  raise ConfigError(f"{path}: unsupported config type {_type_name(tp)}")


def _require(condition: bool, message: str) -> None:
  if not condition:
    raise ConfigError(message)


# --------------------------------------------------------------------------------------
# The encoder.

# (num_layers, hidden_size, num_attention_heads) of the released BERT sizes.
ENCODER_SIZES: Dict[str, tuple] = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}

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
      _require(getattr(self, name) > 0, f"{name} must be positive, got {getattr(self, name)}")
    _require(self.hidden_size % self.num_attention_heads == 0,
             f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
             f"({self.num_attention_heads})")
    for name in ("dropout_rate", "attention_dropout_rate"):
      value = getattr(self, name)
      _require(0.0 <= value < 1.0, f"{name} must be in [0, 1), got {value}")
    _require(self.initializer_range > 0, "initializer_range must be positive")
    _require(self.layer_norm_epsilon > 0, "layer_norm_epsilon must be positive")
    _require(self.hidden_activation in ACTIVATIONS,
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
        raise ConfigError(f"{_field_path(path, 'size')}: unknown encoder size '{size}'; did "
                          f"you mean '{nearest}'? Sizes: {', '.join(ENCODER_SIZES)}")
      layers, hidden, heads = ENCODER_SIZES[size]
      data = {"num_layers": layers, "hidden_size": hidden, "num_attention_heads": heads,
              **data}
    return super().from_dict(data, path)

  @classmethod
  def from_size(cls, size: str, **overrides) -> "EncoderConfig":
    """Returns the config of a released size: tiny, mini, small, medium, base, large."""
    return cls.from_dict(dict(overrides, size=size))

  # The original release's bert_config.json and Hugging Face's config.json use these names.
  _BERT_JSON_NAMES: ClassVar[Dict[str, str]] = {
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
  _BERT_JSON_ACTIVATIONS: ClassVar[Dict[str, str]] = {
      "gelu": "gelu", "gelu_new": "gelu_approximate", "gelu_pytorch_tanh": "gelu_approximate",
      "relu": "relu", "tanh": "tanh",
  }

  @classmethod
  def from_bert_config_dict(cls, data: Mapping[str, Any], source: str = "bert_config.json"
                           ) -> "EncoderConfig":
    """Reads the original release's `bert_config.json` (or a Hugging Face `config.json`).

    Keys that do not describe the encoder (`architectures`, `model_type`, ...) are
    ignored; the ones that do are checked like any other config value.
    """
    values = {}
    for key, value in data.items():
      if key in cls._BERT_JSON_NAMES:
        values[cls._BERT_JSON_NAMES[key]] = value
    if "hidden_activation" in values:
      act = values["hidden_activation"]
      if act not in cls._BERT_JSON_ACTIVATIONS:
        raise ConfigError(f"{source}: unsupported hidden_act '{act}'")
      values["hidden_activation"] = cls._BERT_JSON_ACTIVATIONS[act]
    # The original release always used 1e-12, which its config files do not state.
    values.setdefault("layer_norm_epsilon", 1e-12)
    try:
      return cls.from_dict(values)
    except ConfigError as e:
      raise ConfigError(f"{source}: {e}") from None

  @classmethod
  def from_bert_config_json(cls, path: str) -> "EncoderConfig":
    with open(path, encoding="utf-8") as f:
      try:
        data = json.load(f)
      except json.JSONDecodeError as e:
        raise ConfigError(f"Cannot parse {path}: {e}") from None
    return cls.from_bert_config_dict(data, source=path)

  def to_bert_config_dict(self) -> Dict[str, Any]:
    """Returns the original release's `bert_config.json` fields."""
    inverse_act = {"gelu": "gelu", "gelu_approximate": "gelu_new", "relu": "relu",
                   "tanh": "tanh"}
    out = {}
    for json_name, ours in self._BERT_JSON_NAMES.items():
      value = getattr(self, ours)
      out[json_name] = inverse_act[value] if ours == "hidden_activation" else value
    return out


# --------------------------------------------------------------------------------------
# Experiment sections.


# The Transformer-block projections that model.lora_targets may name.
LORA_TARGETS = ("query", "key", "value", "attention_output", "intermediate", "output")


@dataclasses.dataclass
class ModelConfig(Config):
  """The network: an encoder plus the task's output layer settings."""

  encoder: EncoderConfig = dataclasses.field(default_factory=EncoderConfig)
  # Dropout before a fine-tuning output layer (the paper keeps 0.1 everywhere).
  head_dropout_rate: float = 0.1
  # Above 0: fine-tune low-rank adapters of this rank (bert_tf.models.lora) and the
  # head, the encoder frozen at task.init_checkpoint.
  lora_rank: int = 0
  # The adapters' scale is lora_alpha / lora_rank; 0 means lora_rank (a scale of 1).
  lora_alpha: float = 0.0
  # The block projections given adapters (of LORA_TARGETS).
  lora_targets: List[str] = dataclasses.field(default_factory=lambda: ["query", "value"])

  def validate(self):
    _require(0.0 <= self.head_dropout_rate < 1.0,
             f"head_dropout_rate must be in [0, 1), got {self.head_dropout_rate}")
    _require(self.lora_rank >= 0, f"lora_rank must be >= 0, got {self.lora_rank}")
    _require(self.lora_alpha >= 0, f"lora_alpha must be >= 0, got {self.lora_alpha}")
    _require(bool(self.lora_targets) and set(self.lora_targets) <= set(LORA_TARGETS),
             f"lora_targets must be a non-empty subset of {', '.join(LORA_TARGETS)}, got "
             f"{self.lora_targets}")


@dataclasses.dataclass
class DataConfig(Config):
  """One input pipeline: where the data is and how it is batched."""

  # Comma-separated globs of files, or "dummy" for synthetic batches.
  input_path: str = ""
  # tfrecord, dummy, or a task's raw format (tsv, squad_json, conll, swag_csv, tfds).
  format: str = "tfrecord"
  global_batch_size: int = 32
  seq_length: int = 128
  max_predictions_per_seq: int = 20
  is_training: bool = True
  drop_remainder: bool = True
  shuffle_buffer_size: int = 10000
  # Files read in parallel (interleave cycle length).
  cycle_length: int = 8
  deterministic: bool = False
  compression_type: str = ""
  # Training batches from raw task files: upper bounds (in tokens, [CLS] and [SEP]s
  # included) of length buckets. Each batch then holds examples of one bucket, padded to
  # its longest, instead of short sentences padded to a long one drawn into the same
  # batch. Bounds at or above seq_length are ignored. Empty: every batch padded to its
  # longest example.
  length_buckets: List[int] = dataclasses.field(default_factory=list)
  # Training batches from raw task files (sentence_prediction): the examples of each
  # batch laid end to end in rows of seq_length tokens, each attending only to itself,
  # instead of one padded row per example. A batch still holds global_batch_size
  # examples; its row count varies. Excludes length_buckets.
  pack_examples: bool = False
  # RoBERTa-style masks drawn on the fly from unmasked sequences.
  dynamic_masking: bool = False
  masked_lm_prob: float = 0.15
  whole_word_masking: bool = False
  # TensorFlow Datasets name (for format tfds), for example "glue/sst2".
  tfds_name: str = ""
  tfds_split: str = ""
  tfds_data_dir: str = ""
  # TFRecord input: read every record of every file and check its checksums before
  # training or evaluating starts, so that a corrupt file fails in seconds, named with
  # the byte offset, instead of hours in.
  validate_inputs: bool = False

  def validate(self):
    _require(self.global_batch_size > 0, f"global_batch_size must be positive, got "
             f"{self.global_batch_size}")
    _require(self.seq_length > 2, f"seq_length must exceed 2, got {self.seq_length}")
    _require(self.max_predictions_per_seq >= 0, "max_predictions_per_seq must be >= 0")
    _require(0.0 < self.masked_lm_prob < 1.0,
             f"masked_lm_prob must be in (0, 1), got {self.masked_lm_prob}")
    _require(all(b > 0 for b in self.length_buckets) and
             list(self.length_buckets) == sorted(set(self.length_buckets)),
             f"length_buckets must be positive and increasing, got {self.length_buckets}")
    _require(not (self.pack_examples and self.length_buckets),
             "pack_examples and length_buckets are two ways to batch; set one of them")
    _require(not self.pack_examples or self.is_training,
             "pack_examples applies to training data (is_training: true) only")
    _require(self.compression_type in ("", "GZIP", "ZLIB"),
             f"compression_type must be '', GZIP or ZLIB, got '{self.compression_type}'")

  def active_length_buckets(self) -> List[int]:
    """The length-bucket bounds below seq_length (the last bucket ends at seq_length)."""
    return [b for b in self.length_buckets if b < self.seq_length]


@dataclasses.dataclass
class TokenizerConfig(Config):
  """The WordPiece vocab and its case handling: one tokenizer for training, evaluation
  and export (tasks that read raw text, dynamic masking, the serving signatures)."""

  vocab_file: str = ""
  lower_case: bool = True


OPTIMIZERS = ("adamw", "lamb", "sgd")


@dataclasses.dataclass
class OptimizerConfig(Config):
  """Optimizer and learning-rate schedule: linear warm-up, then polynomial decay."""

  type: str = "adamw"
  learning_rate: float = 1e-4
  warmup_steps: int = 10000
  # 0 means trainer.train_steps.
  decay_steps: int = 0
  end_learning_rate: float = 0.0
  power: float = 1.0
  weight_decay_rate: float = 0.01
  # Variables whose path contains one of these are not decayed.
  exclude_from_weight_decay: List[str] = dataclasses.field(
      default_factory=lambda: ["layer_norm", "LayerNorm", "bias"])
  beta_1: float = 0.9
  beta_2: float = 0.999
  epsilon: float = 1e-6
  # Global-norm clipping; 0 turns it off.
  global_clipnorm: float = 1.0

  def validate(self):
    _require(self.type in OPTIMIZERS, f"type must be one of {OPTIMIZERS}, got '{self.type}'")
    _require(self.learning_rate > 0, f"learning_rate must be positive, got {self.learning_rate}")
    _require(self.warmup_steps >= 0, "warmup_steps must be >= 0")
    _require(self.decay_steps >= 0, "decay_steps must be >= 0")
    _require(self.weight_decay_rate >= 0, "weight_decay_rate must be >= 0")
    _require(0 <= self.beta_1 < 1 and 0 <= self.beta_2 < 1, "beta_1 and beta_2 must be in [0, 1)")
    _require(self.global_clipnorm >= 0, "global_clipnorm must be >= 0")


@dataclasses.dataclass
class TrainerConfig(Config):
  """The training loop: steps, checkpoints, summaries, evaluation."""

  train_steps: int = 1000
  # Steps run inside one tf.function call.
  steps_per_loop: int = 100
  summary_interval: int = 100
  checkpoint_interval: int = 1000
  max_to_keep: int = 5
  # 0 evaluates over the whole evaluation input.
  validation_steps: int = 0
  validation_interval: int = 1000
  # Micro-batches whose gradients are summed before one optimizer update.
  gradient_accumulation_steps: int = 1
  # Console progress line every this many steps (rounded to steps_per_loop).
  log_interval: int = 100

  def validate(self):
    _require(self.train_steps >= 0, "train_steps must be >= 0")
    for name in ("steps_per_loop", "summary_interval", "checkpoint_interval",
                 "validation_interval", "gradient_accumulation_steps", "log_interval"):
      _require(getattr(self, name) > 0, f"{name} must be positive, got {getattr(self, name)}")
    _require(self.max_to_keep > 0, "max_to_keep must be positive")
    _require(self.validation_steps >= 0, "validation_steps must be >= 0")


STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
# "" leaves the choice to Keras (KERAS_BACKEND, default tensorflow).
BACKENDS = ("", "tensorflow", "jax")


@dataclasses.dataclass
class RuntimeConfig(Config):
  """Where and how the computation runs."""

  # The Keras backend that trains: "" (whatever Keras uses: KERAS_BACKEND, or its
  # default, tensorflow), "tensorflow" or "jax". tools/train.py selects it before
  # Keras loads; the strategies below are TensorFlow's.
  backend: str = ""
  distribution_strategy: str = "one_device"
  num_gpus: int = 0
  tpu: str = ""
  # Splits the CPU into this many logical devices (to run MirroredStrategy on CPU).
  num_cpu_devices: int = 0
  mixed_precision_dtype: str = "float32"
  loss_scale: str = "dynamic"
  # XLA-compiles the training step. Unset: on where TensorFlow runs the step on a GPU
  # or TPU, off on CPUs (where the fused kernels do better).
  jit_compile: Optional[bool] = None
  # The TensorFlow CPU speed path (bert_tf.kernels.tensorflow_cpu): the same variables
  # and results, computed faster on CPU. Unset: on where the model runs on TensorFlow on
  # a CPU, off on GPUs, TPUs and other Keras backends. False: the reference layers.
  fused_kernels: Optional[bool] = None
  seed: int = 42
  # Deterministic kernels (tf.config.experimental.enable_op_determinism).
  deterministic: bool = False
  # Collective implementation for multi-worker: auto, ring, nccl.
  all_reduce_alg: str = "auto"

  def validate(self):
    _require(self.backend in BACKENDS,
             f"backend must be one of {BACKENDS}, got '{self.backend}'")
    _require(self.distribution_strategy in STRATEGIES,
             f"distribution_strategy must be one of {STRATEGIES}, got "
             f"'{self.distribution_strategy}'")
    _require(self.mixed_precision_dtype in PRECISIONS,
             f"mixed_precision_dtype must be one of {PRECISIONS}, got "
             f"'{self.mixed_precision_dtype}'")
    _require(self.num_gpus >= 0 and self.num_cpu_devices >= 0,
             "num_gpus and num_cpu_devices must be >= 0")
    _require(self.all_reduce_alg in ("auto", "ring", "nccl"),
             f"all_reduce_alg must be auto, ring or nccl, got '{self.all_reduce_alg}'")


# --------------------------------------------------------------------------------------
# Tasks: each task has its own TaskConfig subclass, defined beside the task
# (bert_tf.tasks); whoever reads an experiment passes the mapping of task names to
# those classes (bert_tf.training.experiments passes the task registry's).


@dataclasses.dataclass
class TaskConfig(Config):
  """Settings shared by every task; `name` selects the task and its config class."""

  name: str = "pretraining"
  # A checkpoint whose encoder (and other checkpoint_items) initialize the model.
  init_checkpoint: str = ""


def task_config_from_dict(data: Optional[Mapping[str, Any]],
                          task_configs: Optional[Mapping[str, type]], path: str = "task"
                          ) -> TaskConfig:
  """Reads a task section with the config class its `name` selects.

  Args:
    data: the task section; a missing name means TaskConfig's default.
    task_configs: {task name: TaskConfig subclass}; None knows no task.
    path: dotted prefix used in error messages.

  Raises:
    ConfigError: an unknown name (naming the nearest known one), or a bad field.
  """
  if not isinstance(data, Mapping):
    raise ConfigError(f"{path} must be a mapping of task fields, got {data!r}")
  name = data.get("name", TaskConfig.name)
  task_configs = task_configs or {}
  if name not in task_configs:
    nearest = nearest_name(str(name), list(task_configs))
    hint = f"; did you mean '{nearest}'?" if nearest else ""
    known = (f" Tasks: {', '.join(sorted(task_configs))}" if task_configs else
             " No task configs were given: read experiments with "
             "bert_tf.training.experiments, which knows every registered task.")
    raise ConfigError(f"{_field_path(path, 'name')}: unknown task '{name}'{hint}{known}")
  return task_configs[name].from_dict(data, path)


class ObsoleteConfigKeyWarning(UserWarning):
  """A config uses a key that moved; it was read in its new place."""


# Keys of the data sections that moved to the tokenizer section.
_TOKENIZER_KEYS = ("vocab_file", "lower_case")


def _move_tokenizer_keys(data: Dict[str, Any], path: str) -> None:
  """Moves an older file's train_data/eval_data vocab_file and lower_case into `tokenizer`.

  Every params.yaml written before the tokenizer section existed holds them (in both
  data sections), so refusing them would leave earlier runs unexportable. Values the
  sections agree on move, with a warning naming what to write instead; values that
  differ between the sections, or from the tokenizer section, are an error.

  Raises:
    ConfigError: the sections disagree (naming what to write instead).
  """
  found: Dict[str, Dict[str, Any]] = {}
  for section in ("train_data", "eval_data"):
    values = data.get(section)
    if not isinstance(values, Mapping) or not any(k in values for k in _TOKENIZER_KEYS):
      continue
    values = dict(values)
    for key in _TOKENIZER_KEYS:
      if key in values:
        found.setdefault(key, {})[_field_path(path, f"{section}.{key}")] = values.pop(key)
    data[section] = values
  if not found:
    return
  tokenizer = data.get("tokenizer")
  tokenizer = dict(tokenizer) if isinstance(tokenizer, Mapping) else {}
  moved = []
  for key, by_path in found.items():
    target = _field_path(path, f"tokenizer.{key}")
    # An empty vocab_file is the old default: it says nothing about the vocab.
    given = {p: v for p, v in by_path.items() if not (key == "vocab_file" and v == "")}
    if key in tokenizer and not (key == "vocab_file" and tokenizer[key] == ""):
      given[target] = tokenizer[key]
    if len({repr(v) for v in given.values()}) > 1:
      settings = ", ".join(f"{p}={v!r}" for p, v in given.items())
      raise ConfigError(f"{', '.join(by_path)}: moved to {target}, one value for training, "
                        f"evaluation and export; these differ ({settings}). Remove them "
                        f"from the data sections and set {target} once.")
    if given:
      tokenizer[key] = next(iter(given.values()))
    moved.append(f"{', '.join(by_path)}: moved to {target}; set it once there")
  data["tokenizer"] = tokenizer
  warnings.warn("Obsolete config keys read as the tokenizer section: " + "; ".join(moved),
                ObsoleteConfigKeyWarning, stacklevel=2)


@dataclasses.dataclass
class ExperimentConfig(Config):
  """Everything one run needs: task, model, tokenizer, data, optimizer, trainer, runtime."""

  # The base TaskConfig until read with the task configs (see from_dict).
  task: TaskConfig = dataclasses.field(default_factory=TaskConfig)
  model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
  tokenizer: TokenizerConfig = dataclasses.field(default_factory=TokenizerConfig)
  train_data: DataConfig = dataclasses.field(default_factory=DataConfig)
  eval_data: DataConfig = dataclasses.field(
      default_factory=lambda: DataConfig(is_training=False, drop_remainder=False))
  optimizer: OptimizerConfig = dataclasses.field(default_factory=OptimizerConfig)
  trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)
  runtime: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)

  @classmethod
  def from_dict(cls, data: Optional[Mapping[str, Any]], path: str = "",
                task_configs: Optional[Mapping[str, type]] = None):
    """Builds an experiment, reading its task section with `task_configs`.

    Args:
      data: nested mapping; missing keys keep their defaults.
      path: dotted prefix used in error messages.
      task_configs: {task name: TaskConfig subclass} (the task registry's,
        bert_tf.tasks.base.task_configs()). Without it only a section-less
        experiment (the base TaskConfig) can be read.
    """
    data = dict(data or {})
    _move_tokenizer_keys(data, path)
    if task_configs is not None or "task" in data:
      task = data.get("task") or {}
      if not isinstance(task, TaskConfig):
        data["task"] = task_config_from_dict(task, task_configs, _field_path(path, "task"))
    return super().from_dict(data, path)

  def _reparse(self, merged: Mapping[str, Any], task_configs: Optional[Mapping[str, type]]
               = None):
    # The task's own class stays known, so that overriding other fields needs no mapping.
    known = {self.task.name: type(self.task)}
    known.update(task_configs or {})
    return type(self).from_dict(merged, task_configs=known)

  def validate(self):
    encoder = self.model.encoder
    for section in ("train_data", "eval_data"):
      data = getattr(self, section)
      _require(data.seq_length <= encoder.max_position_embeddings,
               f"{section}.seq_length ({data.seq_length}) exceeds "
               f"model.encoder.max_position_embeddings ({encoder.max_position_embeddings})")
    _require(not (self.train_data.pack_examples and
                  self.trainer.gradient_accumulation_steps > 1),
             "train_data.pack_examples does not split into micro-batches: set "
             "trainer.gradient_accumulation_steps to 1")
    if self.trainer.gradient_accumulation_steps > 1:
      _require(self.train_data.global_batch_size % self.trainer.gradient_accumulation_steps == 0,
               f"train_data.global_batch_size ({self.train_data.global_batch_size}) must be "
               f"divisible by trainer.gradient_accumulation_steps "
               f"({self.trainer.gradient_accumulation_steps})")
