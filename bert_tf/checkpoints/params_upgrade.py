"""Reading an earlier run's configuration: keys that moved since, read in their new place,
and keys that no longer apply, dropped.

A model_dir's params.yaml records the experiment that trained its checkpoints; one written
by an earlier version may hold keys that have moved. `upgrade_experiment` rewrites such a
mapping before it is read as an ExperimentConfig (bert_tf.training.experiments does so for
every file and override it reads), with a warning naming what to write instead, so that
earlier runs stay resumable and exportable.
"""

import warnings
from typing import Any, Dict, Mapping

from bert_tf import configs


# The runtime section's kernel settings moved too: RuntimeConfig reads them in their new
# place itself (configs.MOVED_RUNTIME_KEYS), so that an override of a built config
# (`config.override(["runtime.gpu_attention=xla"])`) is read as a file is.
ObsoleteConfigKeyWarning = configs.ObsoleteConfigKeyWarning


# Keys of the data sections that moved to the tokenizer section.
_TOKENIZER_KEYS = ("vocab_file", "lower_case")
# Keys of the data sections that ordered tf.data's reads, with their defaults: both
# engines now read records in one order (bert_tf.data.records.record_order), always the same.
_ORDER_KEYS = {"cycle_length": 8, "deterministic": False}


def upgrade_experiment(data: Dict[str, Any], path: str = "") -> Dict[str, Any]:
  """Moves an earlier experiment mapping's keys to their places now, in place.

  Args:
    data: an experiment mapping, as read from YAML with its overrides.
    path: dotted prefix used in messages.

  Returns:
    `data`.

  Raises:
    ConfigError: moved keys whose values disagree (naming what to write instead).
  """
  _move_tokenizer_keys(data, path)
  _drop_order_keys(data, path)
  return data


def _drop_order_keys(data: Dict[str, Any], path: str) -> None:
  """Removes an earlier file's cycle_length and deterministic from the data sections:
  every params.yaml of those versions holds them; a value other than the default is
  named in a warning, since the order no longer depends on it."""
  changed = []
  for section in ("train_data", "eval_data"):
    values = data.get(section)
    if not isinstance(values, Mapping) or not any(k in values for k in _ORDER_KEYS):
      continue
    values = dict(values)
    for key, default in _ORDER_KEYS.items():
      if key in values and values.pop(key) != default:
        changed.append(configs.field_path(path, f"{section}.{key}"))
    data[section] = values
  if changed:
    warnings.warn(f"{', '.join(changed)}: no longer read; both engines read the records in "
                  "one deterministic order (train_data.shuffle_buffer_size and "
                  "runtime.seed set it)", ObsoleteConfigKeyWarning, stacklevel=3)


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
        moved_from = configs.field_path(path, f"{section}.{key}")
        found.setdefault(key, {})[moved_from] = values.pop(key)
    data[section] = values
  if not found:
    return
  tokenizer = data.get("tokenizer")
  tokenizer = dict(tokenizer) if isinstance(tokenizer, Mapping) else {}
  moved = []
  for key, by_path in found.items():
    target = configs.field_path(path, f"tokenizer.{key}")
    # An empty vocab_file is the old default: it says nothing about the vocab.
    given = {p: v for p, v in by_path.items() if not (key == "vocab_file" and v == "")}
    if key in tokenizer and not (key == "vocab_file" and tokenizer[key] == ""):
      given[target] = tokenizer[key]
    if len({repr(v) for v in given.values()}) > 1:
      settings = ", ".join(f"{p}={v!r}" for p, v in given.items())
      raise configs.ConfigError(
          f"{', '.join(by_path)}: moved to {target}, one value for training, evaluation "
          f"and export; these differ ({settings}). Remove them from the data sections and "
          f"set {target} once.")
    if given:
      tokenizer[key] = next(iter(given.values()))
    moved.append(f"{', '.join(by_path)}: moved to {target}; set it once there")
  data["tokenizer"] = tokenizer
  warnings.warn("Obsolete config keys read as the tokenizer section: " + "; ".join(moved),
                ObsoleteConfigKeyWarning, stacklevel=3)

