"""params.yaml: the configuration a training run saves in its model_dir, and the check
that a resumed run keeps the entries that fix its variables' and data's shapes. Its
first line records the CRC32C of the rest (bert_tf.configs.params_checksum).
"""

import logging
import os
from typing import Dict, List, Optional, Sequence

from bert_tf import configs
from bert_tf.configs import params_checksum
from bert_tf.configs import run_folder
from bert_tf.training import experiments
from bert_tf.utils import files

PARAMS_FILE = run_folder.PARAMS_FILE
# params.yaml entries that fix the shapes of the checkpointed variables or of the data
# the input position counts: a resumed run must not change them.
_SHAPE_KEYS = ("model.", "task.", "train_data.seq_length",
               "train_data.max_predictions_per_seq", "train_data.global_batch_size")
_FREE_TASK_KEYS = ("task.init_checkpoint",)
# Differing entries a mismatch error shows (the first by _rank), so that it stays short;
# the task's name alone where it differs.
_SHOWN_ENTRIES = 3


class ParamsMismatchError(configs.ConfigError):
  """The model_dir's params.yaml fixes shapes that the new configuration changes."""


def save(experiment: configs.ExperimentConfig, model_dir: str) -> None:
  """Writes `experiment` as model_dir's params.yaml (atomically), its CRC32C first."""
  with files.atomic_open(os.path.join(model_dir, PARAMS_FILE)) as f:
    f.write(params_checksum.with_checksum(experiment.to_yaml()))


def _flat(data: dict, prefix: str = "") -> Dict[str, object]:
  flat = {}
  for key, value in data.items():
    if isinstance(value, dict):
      flat.update(_flat(value, f"{prefix}{key}."))
    else:
      flat[f"{prefix}{key}"] = value
  return flat


def recorded_params(model_dir: str, replace: bool = False
                    ) -> Optional[configs.ExperimentConfig]:
  """The configuration model_dir's params.yaml recorded, or None without one (or,
  with `replace`, where it is damaged: one warning line).

  Raises:
    DamagedParamsError: the file is damaged (params_checksum.check_intact), without
      `replace`.
  """
  path = os.path.join(model_dir, PARAMS_FILE)
  try:
    data = files.read_bytes(path)  # one request on remote storage, no listing
  except FileNotFoundError:
    return None
  try:
    params_checksum.check_intact(path, data)
  except params_checksum.DamagedParamsError as e:
    if not replace:
      raise
    logging.warning("%s: replaced", e)
    return None
  # Parsed, not read raw: entries a newer version added come back with their defaults.
  return experiments.experiment_from_yaml(path)


def evaluation_config_files(model_dir: str, config_files: Sequence[str]) -> List[str]:
  """The config files of an evaluation (--mode=eval) of model_dir's run: its params.yaml
  (the training settings: model, task, data shapes, runtime), then `config_files`, so
  that only what the evaluation changes (eval_data.*) need be given; `config_files`
  alone where model_dir holds no params.yaml."""
  path = os.path.join(model_dir, PARAMS_FILE)
  if not files.exists(path):
    return list(config_files)
  params_checksum.check_intact(path)
  return [path, *config_files]


def check_params_match(experiment: configs.ExperimentConfig, model_dir: str,
                       recorded: Optional[configs.ExperimentConfig],
                       replace: bool = False) -> List[str]:
  """Raises ParamsMismatchError when model_dir's params.yaml (`recorded`, as
  `recorded_params` reads it: None without one) and `experiment` differ in an entry that
  fixes variable or data shapes (model.*, task.*, the training data's sequence length,
  predictions per sequence and global batch); other entries (steps, intervals, learning
  rate, paths) may change between runs of one model_dir.

  Returns:
    the differing entries (with `replace`, which raises nothing).
  """
  path = os.path.join(model_dir, PARAMS_FILE)
  if recorded is None:
    return []
  old = _flat(recorded.as_dict())
  new = _flat(experiment.as_dict())
  differing = sorted(
      key for key in set(old) | set(new)
      if key.startswith(_SHAPE_KEYS) and key not in _FREE_TASK_KEYS
      and old.get(key) != new.get(key))
  if differing and not replace:
    ranked = sorted(differing, key=lambda key: _rank(key, old.get(key), new.get(key)))
    # Another task differs in all its fields: its name says it.
    count = 1 if ranked[0] == "task.name" else _SHOWN_ENTRIES
    shown = "; ".join(f"{key}: {old.get(key)!r} in {PARAMS_FILE}, now {new.get(key)!r}"
                      for key in ranked[:count])
    more = f" and {len(ranked) - count} more" if len(ranked) > count else ""
    raise ParamsMismatchError(
        f"{path} fixes other model or data shapes: {shown}{more}. Use another model_dir, "
        f"or --replace_params (replace_params=True) to replace {PARAMS_FILE}.")
  return differing


def record(experiment: configs.ExperimentConfig, model_dir: str) -> None:
  """Writes model_dir's params.yaml of `experiment`, its vocab (tokenizer.vocab_file,
  where the file is there) copied into model_dir and named relative to it
  (run_folder.keep_vocab), so that the run exports and resumes moved or read from
  another directory."""
  vocab_file = experiment.tokenizer.vocab_file
  if vocab_file and files.exists(vocab_file):
    experiment = experiment.override(
        {"tokenizer": {"vocab_file": run_folder.keep_vocab(vocab_file, model_dir)}})
  save(experiment, model_dir)


def _rank(key: str, old: object, new: object) -> tuple:
  """The order of differing entries in the error: the task's name first (another task
  differs in all its fields), then entries set on both sides (an entry only one task
  has is None on the other), the model before the data, then by name."""
  return (key != "task.name", old is None or new is None, not key.startswith("model."), key)
