"""Finding, reading and resolving experiment configs: named experiments, files, overrides.

Experiments are read here, with the config class of every registered task
(bert_tf.tasks.base.task_configs()), so that each task section is checked against
its own task's fields. A named experiment is a YAML file in official_configs/experiments/, named by its
stem (`pretraining_bert_tiny`). official_configs/ is package data inside an installed wheel
(bert_tf/official_configs/) and sits at the repository root in a checkout, editable or not.
Command-line shorthands (--distribution_strategy, --mixed_precision_dtype, ...) become
ordinary dotted overrides of runtime.* fields.
"""

import importlib.resources
import os
import pathlib
from typing import Any, Dict, List, Mapping, Optional, Sequence

from bert_tf import configs


def _official_configs_dir() -> pathlib.Path:
  """official_configs/ of the bert_tf that is imported: inside it, or beside it.

  Found from the imported package, not imported as bert_tf.official_configs: an
  editable install maps that name to the checkout it was installed from, which need
  not be the one on PYTHONPATH.
  """
  package = pathlib.Path(str(importlib.resources.files("bert_tf")))
  installed = package / "official_configs"
  return installed if installed.is_dir() else package.parent / "official_configs"


OFFICIAL_CONFIGS_DIR = _official_configs_dir()
EXPERIMENTS_DIR = OFFICIAL_CONFIGS_DIR / "experiments"
MODELS_DIR = OFFICIAL_CONFIGS_DIR / "models"


def _task_configs() -> Dict[str, type]:
  # Imported on first use: finding experiment files and peeking at them must not load
  # Keras, whose backend a training run chooses from them (bert_tf.training.backends).
  from bert_tf.tasks import base as task_base  # pylint: disable=g-import-not-at-top
  return task_base.task_configs()


def experiment_from_dict(data: Optional[Mapping[str, Any]]) -> configs.ExperimentConfig:
  """An ExperimentConfig from a nested mapping, its task section read by its task and
  the keys of earlier versions read in their new places (`checkpoints.params_upgrade`)."""
  # Imported on first use, as the task configs are: bert_tf.checkpoints loads Keras.
  from bert_tf.checkpoints import params_upgrade  # pylint: disable=g-import-not-at-top
  data = params_upgrade.upgrade_experiment(dict(data or {}))
  return configs.ExperimentConfig.from_dict(data, task_configs=_task_configs())


def experiment_from_yaml(*paths: str, overrides=None) -> configs.ExperimentConfig:
  """An ExperimentConfig from YAML files merged in order, then overrides (a mapping or
  dotted `a.b=value` strings); e.g. a model_dir's params.yaml.

  Raises:
    ConfigError: an unknown key or a mistyped or impossible value, naming the field
      and, where one file holds the mistake, that file first (`FILE: field ...`).
  """
  try:
    return experiment_from_dict(configs.merged_yaml(*paths, overrides=overrides))
  except configs.ConfigError as e:
    source = _file_holding(e, paths)
    if source is None:
      raise
    raise configs.ConfigError(f"{source}: {e}") from None


def _file_holding(error: configs.ConfigError, paths: Sequence[str]) -> Optional[str]:
  """The last of `paths` that makes the same error read alone; None where none does
  (an override's mistake, one that needs several files) or the error names it already.
  Called only once reading failed, so a valid configuration costs nothing."""
  message = str(error)
  for path in reversed(paths):
    if path in message:
      return None
    try:
      experiment_from_dict(configs.load_yaml(path))
    except configs.ConfigError as alone:
      if str(alone) == message:
        return path
  return None


def registered_experiments() -> List[str]:
  """Stems of the YAML files in official_configs/experiments/."""
  if not EXPERIMENTS_DIR.is_dir():
    return []
  return sorted(p.stem for p in EXPERIMENTS_DIR.glob("*.yaml"))


def experiment_path(name_or_path: str) -> str:
  """The YAML file of a named experiment, or `name_or_path` itself when it is a file.

  Raises:
    ConfigError: naming the unknown experiment and the registered ones.
  """
  if os.path.isfile(name_or_path):
    return name_or_path
  candidate = EXPERIMENTS_DIR / f"{name_or_path}.yaml"
  if candidate.is_file():
    return str(candidate)
  names = registered_experiments()
  nearest = configs.nearest_name(name_or_path, names)
  hint = f"; did you mean '{nearest}'?" if nearest else ""
  raise configs.ConfigError(
      f"Unknown experiment '{name_or_path}': not a file and not a registered experiment"
      f"{hint} Registered: {', '.join(names)}")


def runtime_overrides(distribution_strategy: Optional[str] = None, tpu: Optional[str] = None,
                      num_gpus: Optional[int] = None,
                      mixed_precision_dtype: Optional[str] = None,
                      jit_compile: Optional[bool] = None,
                      init_checkpoint: Optional[str] = None,
                      validate_inputs: Optional[bool] = None,
                      backend: Optional[str] = None) -> Dict[str, object]:
  """Dotted overrides for the command-line shorthands that were given (not None)."""
  values = {
      "runtime.backend": backend,
      "runtime.distribution_strategy": distribution_strategy,
      "runtime.tpu": tpu,
      "runtime.num_gpus": num_gpus,
      "runtime.mixed_precision_dtype": mixed_precision_dtype,
      "runtime.jit_compile": jit_compile,
      "task.init_checkpoint": init_checkpoint,
      "train_data.validate_inputs": validate_inputs,
  }
  return {key: value for key, value in values.items() if value is not None}


def resolve_experiment(experiment: Optional[str] = None, config_files: Sequence[str] = (),
                       params_override: Optional[str] = None,
                       shorthands: Optional[Dict[str, object]] = None
                       ) -> configs.ExperimentConfig:
  """Merges, in order: the named experiment, each config file, params_override, then
  the shorthand flags.

  Raises:
    ConfigError: no config given, an unknown experiment or key, or a shorthand flag
      contradicting params_override for the same field.
  """
  files = []
  if experiment:
    files.append(experiment_path(experiment))
  files.extend(config_files or [])
  if not files:
    raise configs.ConfigError("Give --experiment (one of "
                              f"{', '.join(registered_experiments())}) or --config_file")
  config = experiment_from_yaml(*files, overrides=params_override or None)
  shorthands = shorthands or {}
  if params_override and shorthands:
    explicit = configs.parse_dotted_overrides(params_override)
    for key, value in shorthands.items():
      node = explicit
      for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
      if node is not None and node != value:
        raise configs.ConfigError(
            f"--params_override sets {key}={node!r} but a flag sets it to {value!r}")
  if shorthands:
    config = config.override([f"{k}={v}" if not isinstance(v, bool) else
                              f"{k}={'true' if v else 'false'}" for k, v in shorthands.items()])
  return config
