"""The config framework: typed dataclasses loaded strictly from dicts and YAML files.

Configs load from dicts and YAML files, take dotted overrides (`trainer.train_steps=1000`)
and check every value on the way in: an unknown key is an error naming the key and the
nearest valid one, and a wrong type or an impossible value is an error naming the field.
The schemas built on it are `configs.encoder` and `configs.experiment`.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import types
import typing
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import yaml

from bert_tf.configs import run_folder
from bert_tf.utils import errors
from bert_tf.utils import files


class ConfigError(errors.UserError, ValueError):
  """A configuration value is unknown, mistyped or impossible."""


def field_path(prefix: str, name: str) -> str:
  """The dotted path of field `name` under `prefix` ("" at the top), for messages."""
  return f"{prefix}.{name}" if prefix else name


def require(condition: bool, message: str) -> None:
  """Raises ConfigError(message) unless `condition`: the checks of `Config.validate`."""
  if not condition:
    raise ConfigError(message)


def nearest_name(name: str, choices: Sequence[str]) -> str:
  """The choice most similar to `name` (for "did you mean" hints); "" when none."""
  matches = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.0)
  return matches[0] if matches else ""


def _unknown_key_error(path: str, key: str, valid: Sequence[str]) -> ConfigError:
  nearest = nearest_name(key, valid)
  hint = f"; did you mean '{field_path(path, nearest)}'?" if nearest else ""
  return ConfigError(f"Unknown config key '{field_path(path, key)}'{hint} "
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
      kwargs[name] = _coerce(value, hints[name], field_path(path, name))
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
    merged = _deep_merge(self.as_dict(), _nested_overrides(overrides))
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
    with files.atomic_open(path) as f:
      f.write(self.to_yaml())

  @classmethod
  def from_yaml(cls, *paths: str, overrides=None, **parse_args):
    """Loads YAML files in order (later ones override earlier), then overrides.

    `parse_args` go to from_dict (ExperimentConfig: task_configs).
    """
    return cls.from_dict(merged_yaml(*paths, overrides=overrides), **parse_args)


def merged_yaml(*paths: str, overrides=None) -> Dict[str, Any]:
  """The mapping of YAML files merged in order (later ones override earlier), then
  `overrides` (a nested mapping or dotted `a.b=value` strings); not yet validated."""
  merged: Dict[str, Any] = {}
  for p in paths:
    merged = _deep_merge(merged, load_yaml(p))
  # Overrides join before validation, so that they can fix what the files leave
  # inconsistent (a short max_position_embeddings and a long seq_length, say).
  if overrides:
    merged = _deep_merge(merged, _nested_overrides(overrides))
  return merged


def load_yaml(path: str) -> Dict[str, Any]:
  """Reads one YAML mapping, with the file name in any error; a run folder's
  params.yaml with its relative file entries resolved beside it (`run_folder`)."""
  # A local file with `open` (files.read_bytes): a tool reads its backend before
  # anything loads TensorFlow (bert_tf.training.backends).
  try:
    text = files.read_bytes(path)
  except FileNotFoundError:
    raise ConfigError(f"Config file not found: {path}") from None
  except OSError as e:
    raise ConfigError(f"Cannot read config file {path}: {e.strerror or e}") from None
  try:
    data = yaml.safe_load(text.decode("utf-8"))
  except UnicodeDecodeError as e:
    raise ConfigError(f"Config file {path} is not UTF-8 text: {e}") from None
  except yaml.YAMLError as e:
    raise ConfigError(f"Cannot parse YAML config {path}: " + " ".join(str(e).split())) from None
  if data is None:
    return {}
  if not isinstance(data, dict):
    raise ConfigError(f"Config file {path} must hold a mapping, got {type(data).__name__}")
  return run_folder.resolve_paths(data, path)


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


def _nested_overrides(overrides: Union[Mapping[str, Any], Sequence[str], str]
                      ) -> Dict[str, Any]:
  """A nested mapping of overrides given as one, or as dotted `a.b=value` strings."""
  if isinstance(overrides, Mapping):
    return dict(overrides)
  return parse_dotted_overrides(overrides)


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


def _coerce_tuple(value, args, path: str) -> tuple:
  """A tuple of a YAML list (a tuple is written as a list): Tuple[X, ...] of any length,
  Tuple[X, Y] of exactly those items."""
  if not args or (len(args) == 2 and args[1] is Ellipsis):
    item_type = args[0] if args else Any
    return tuple(_coerce(v, item_type, f"{path}[{i}]") for i, v in enumerate(value))
  if len(value) != len(args):
    raise ConfigError(f"{path} must be a list of {len(args)} items, got {value!r}")
  return tuple(_coerce(v, tp, f"{path}[{i}]") for i, (v, tp) in enumerate(zip(value, args)))


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
  if origin in (list, List, tuple, Sequence) or tp in (list, tuple):
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
      raise ConfigError(f"{path} must be a list, got {value!r}")
    if origin is tuple or tp is tuple:
      return _coerce_tuple(value, args, path)
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
