"""The model a run trains and exports: the task's model (Task.build_model), with the
run's model variants applied, low-rank adapters (model.lora_rank) and float8 block
projections (runtime.float8_training). Both engines and the exporter build it here, so a
task declares its model once and never sees the variants.

A trained model is read back here too, for serving and inference alike, without
TensorFlow: a run's (or converted folder's) experiment in float32, its vocab, the data
section whose lengths it serves, and its checkpoint restored into the task's model.
"""

import os
from typing import Optional

from bert_tf import configs
from bert_tf.configs import params_checksum
from bert_tf.configs import run_folder
from bert_tf.checkpoints import restore
from bert_tf.models import float8
from bert_tf.models import lora
from bert_tf.tasks import base as task_base
from bert_tf.training import experiments
from bert_tf.utils import errors
from bert_tf.utils import files

# Items no serving signature uses; a checkpoint may lack them.
_OPTIONAL_ITEMS = ("next_sentence",)


def build(task):
  """task.build_model(), given the adapters of model.lora_rank when it is set: the
  encoder restored from task.init_checkpoint, frozen, with low-rank adapters
  (bert_tf.models.lora). With adapters, `trained_items` holds only what trains, and the
  encoder always comes from task.init_checkpoint, on a resumed run too. With
  runtime.float8_training the block projections train in float8
  (bert_tf.models.float8), converted after the warm start from task.init_checkpoint,
  which task.initialize then reports.

  Args:
    task: a bert_tf.tasks.base.Task.

  Returns:
    the Keras model, with `checkpoint_items`.

  Raises:
    ConfigError: model.lora_rank without task.init_checkpoint, or float8 on a model
      that cannot take it.
  """
  model = task.build_model()
  settings = task.experiment.model
  if settings.lora_rank:
    if not task.config.init_checkpoint:
      raise configs.ConfigError("model.lora_rank: LoRA fine-tunes a pretrained encoder; "
                                "set task.init_checkpoint")
    restore.restore_items(task.config.init_checkpoint, model.checkpoint_items,
                          items=("encoder",))
    lora.enable(model, settings.lora_rank, settings.lora_targets, settings.lora_alpha)
  if task.experiment.runtime.float8_training:
    # Checkpoints of plain models hold no float8 scaling state: restore into the plain
    # layers, then convert them.
    float8.check_supported(model)
    restored = task.initialize(model)
    float8.enable(model)
    object.__setattr__(model, "initialized_when_built", restored)
  return model


def data_config_for_export(experiment: configs.ExperimentConfig) -> configs.DataConfig:
  """The data section whose seq_length and serving options an export uses: eval_data,
  or train_data for a run that had no evaluation input."""
  if experiment.eval_data.input_path or not experiment.train_data.input_path:
    return experiment.eval_data
  return experiment.train_data


def serving_seq_length(experiment: configs.ExperimentConfig,
                       seq_length: Optional[int] = None) -> int:
  """The packed length T a trained model is served with: `seq_length`, else its
  serving data section's (`data_config_for_export`).

  Raises:
    InputError: T beyond the model's max_position_embeddings.
  """
  seq_length = seq_length or data_config_for_export(experiment).seq_length
  max_position = experiment.model.encoder.max_position_embeddings
  if seq_length > max_position:
    raise errors.InputError(
        f"seq_length {seq_length} exceeds max_position_embeddings {max_position}")
  return seq_length


def check_vocab_size(experiment: configs.ExperimentConfig, vocab_size: int,
                     vocab_file: str) -> None:
  """Raises InputError unless the vocab a model is served with (`vocab_size` tokens,
  read from `vocab_file`) has as many tokens as its word-embedding table."""
  rows = experiment.model.encoder.vocab_size
  if vocab_size != rows:
    raise errors.InputError(f"Vocab {vocab_file} has {vocab_size} tokens but the model's "
                            f"vocab_size is {rows}")


def vocab_of(experiment: configs.ExperimentConfig, vocab_file: Optional[str] = None,
             config: str = "the config") -> str:
  """The vocab an export takes: `vocab_file` (--vocab_file), else the experiment's
  tokenizer.vocab_file (a run folder's params.yaml names the one the folder holds).

  Raises:
    InputError: neither is set, or the file is not there (naming --vocab_file and the
      setting of `config`).
  """
  named = vocab_file or experiment.tokenizer.vocab_file
  if not named:
    raise errors.InputError(f"No vocab: pass --vocab_file, or set tokenizer.vocab_file in "
                            f"{config}")
  files.check_readable(named, "--vocab_file")
  if not files.exists(named):
    where = "--vocab_file" if vocab_file else f"tokenizer.vocab_file of {config}"
    raise errors.MissingInputError(f"Vocab file not found: {named} ({where}); pass the "
                                   "vocab the model was trained with as --vocab_file")
  return named


def load_experiment(config) -> configs.ExperimentConfig:
  """An ExperimentConfig from itself or a YAML path (a run's params.yaml checked
  first: params_checksum.check_intact), in float32 for serving."""
  if isinstance(config, str):
    if os.path.basename(config) == run_folder.PARAMS_FILE:
      params_checksum.check_intact(config)
    config = experiments.experiment_from_yaml(config)
  # Serving computes in float32 whatever precision training used; weights are float32
  # (a float8 run's too: its scaling state stays behind in the checkpoint).
  return config.override({"runtime": {"mixed_precision_dtype": "float32",
                                      "float8_training": False}})


def model_from_checkpoint(experiment: configs.ExperimentConfig, checkpoint: str):
  """Builds the experiment's task model and restores every checkpoint item it has.

  A LoRA model (model.lora_rank) gets its encoder from the experiment's
  task.init_checkpoint and its adapters and head from `checkpoint`; the adapters are
  then merged into the kernels (bert_tf.models.lora.merge), so serving computes plain
  Dense layers.

  Args:
    experiment: the experiment config.
    checkpoint: a checkpoint prefix, or a directory (its latest checkpoint).

  Returns:
    The Keras model with restored weights.

  Raises:
    KeyError: the checkpoint lacks an item the model serves with (naming both sets).
  """
  model = build(task_base.get_task(experiment))
  prefix = restore.resolve_checkpoint(checkpoint)
  available = restore.checkpoint_children(prefix)
  trained = model.trained_items
  items = [name for name in trained if name in available or name not in _OPTIONAL_ITEMS]
  restore.restore_items(prefix, trained, items=tuple(items))
  lora.merge(model)
  return model
