"""A training run in its model_dir, for the trainers of every backend: params.yaml (the
configuration a run saves there, and the check that a resumed run keeps the entries
that fix its variables' and data's shapes) and the order of a run (`run_in_model_dir`).
"""

import logging
import os
from typing import Callable, Dict, List, Optional

from bert_tf import configs
from bert_tf.training import experiments
from bert_tf.training import run_checks
from bert_tf.utils import errors
from bert_tf.utils import files

PARAMS_FILE = "params.yaml"
MODES = ("train", "eval", "train_and_eval")
# params.yaml entries that fix the shapes of the checkpointed variables or of the data
# the input position counts: a resumed run must not change them.
_SHAPE_KEYS = ("model.", "task.", "train_data.seq_length",
               "train_data.max_predictions_per_seq", "train_data.global_batch_size")
_FREE_TASK_KEYS = ("task.init_checkpoint",)


class ParamsMismatchError(configs.ConfigError):
  """The model_dir's params.yaml fixes shapes that the new configuration changes."""


def _flat(data: dict, prefix: str = "") -> Dict[str, object]:
  flat = {}
  for key, value in data.items():
    if isinstance(value, dict):
      flat.update(_flat(value, f"{prefix}{key}."))
    else:
      flat[f"{prefix}{key}"] = value
  return flat


def recorded_params(model_dir: str) -> Optional[configs.ExperimentConfig]:
  """The configuration model_dir's params.yaml recorded, or None without one."""
  path = os.path.join(model_dir, PARAMS_FILE)
  if not files.exists(path):
    return None
  # Parsed, not read raw: entries a newer version added come back with their defaults.
  return experiments.experiment_from_yaml(path)


def check_params_match(experiment: configs.ExperimentConfig, model_dir: str,
                       replace: bool = False) -> List[str]:
  """Raises ParamsMismatchError when model_dir's params.yaml and `experiment` differ in
  an entry that fixes variable or data shapes (model.*, task.*, the training data's
  sequence length, predictions per sequence and global batch); other entries (steps,
  intervals, learning rate, paths) may change between runs of one model_dir.

  Returns:
    the differing entries (with `replace`, which raises nothing).
  """
  path = os.path.join(model_dir, PARAMS_FILE)
  recorded = recorded_params(model_dir)
  if recorded is None:
    return []
  old = _flat(recorded.as_dict())
  new = _flat(experiment.as_dict())
  differing = sorted(
      key for key in set(old) | set(new)
      if key.startswith(_SHAPE_KEYS) and key not in _FREE_TASK_KEYS
      and old.get(key) != new.get(key))
  if differing and not replace:
    shown = "; ".join(f"{key}: {old.get(key)!r} in {PARAMS_FILE}, now {new.get(key)!r}"
                      for key in differing)
    raise ParamsMismatchError(
        f"The configuration differs from {path} in entries that fix the model or data "
        f"shapes ({shown}). Use another model_dir, or pass replace_params (tools/train.py "
        f"--replace_params) to replace {PARAMS_FILE}.")
  return differing


def run_in_model_dir(experiment: configs.ExperimentConfig, model_dir: str, mode: str,
                     replace_params: bool, make_trainer: Callable,
                     log_fn: Optional[Callable[[str], None]] = None) -> Dict[str, float]:
  """Checks the configuration and params.yaml, builds the trainer, restores model_dir's
  checkpoint, checks the input, saves params.yaml there (chief only) and runs `mode`.

  Nothing is written before model_dir is known to be writable (files.check_writable:
  storage that is not served or does not answer is one error naming it), nor before the configuration (bert_tf.training.run_checks: a vocab of
  another size than the model's is an error) and the input are accepted and the restore
  succeeded: a refused run leaves no params.yaml behind. An existing one that fixes other
  shapes is an error (`check_params_match`) unless replace_params. params.yaml records
  what the input files fix and the configuration left unset (the data loader's settings_from_files:
  the vocab pretraining data was made with). A training run logs one warning line for
  each setting longer than the run (warm-up, decay, checkpoint interval), and a resumed
  one where its learning-rate schedule differs from the recorded one.

  Args:
    mode: "train", "eval" (the latest checkpoint in model_dir) or "train_and_eval".
    make_trainer: () -> a bert_tf.training.trainer.Trainer.
    log_fn: receives the warning lines (default: logging at WARNING).

  Returns:
    the final metrics (training report and/or evaluation metrics).
  """
  if mode not in MODES:
    raise ValueError(f"mode must be train, eval or train_and_eval, got '{mode}'")
  log = log_fn or (lambda line: logging.warning("%s", line))
  # Storage that is not served or does not answer is one error before anything is
  # read or written there.
  files.check_writable(model_dir)
  differing = check_params_match(experiment, model_dir, replace=replace_params)
  run_checks.check_vocab_size(experiment)
  recorded = recorded_params(model_dir)
  trainer = make_trainer()
  # The saved input position is one of batches of the old data shapes.
  trainer.restore_input_position = not any(k.startswith("train_data.") for k in differing)
  if mode == "eval" and trainer.checkpoints.latest() is None:
    raise errors.MissingInputError(f"--mode=eval needs a checkpoint in {model_dir}")
  trainer.initialize()
  to_record = experiment
  for section in {"train": ["train_data"], "eval": ["eval_data"],
                  "train_and_eval": ["train_data", "eval_data"]}[mode]:
    trainer.check_inputs(section)
    inferred = trainer.task.data_loader(getattr(experiment, section)).settings_from_files()
    if inferred:
      to_record = to_record.override(inferred)
  if mode != "eval" and trainer.is_chief:
    warnings = run_checks.schedule_warnings(experiment)
    if trainer.restored_from:
      warnings.append(run_checks.resumed_schedule_warning(
          recorded, experiment, trainer.step, os.path.join(model_dir, PARAMS_FILE)))
    for line in filter(None, warnings):
      log(line)
  if trainer.is_chief:
    files.make_dirs(model_dir)
    to_record.save(os.path.join(model_dir, PARAMS_FILE))
  if mode == "eval":
    return trainer.evaluate()
  return trainer.train(evaluate_every=(mode == "train_and_eval"))
