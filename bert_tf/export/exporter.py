"""SavedModels for TF Serving, from a model or from a checkpoint and its config.

An export goes to `EXPORT_BASE/<version>/` (an integer directory, as TF Serving's
file-system source expects; by default the next free integer). It is written
to a hidden temporary directory first and renamed when complete, so a server
watching EXPORT_BASE never sees a half-written version. The vocab and the
label names are SavedModel assets: the directory is self-contained and can be
moved.

Kinds of export (`kind`):
  encoder      pooled_output, sequence_output (any checkpoint's encoder)
  fill_mask    top-k tokens for every [MASK] (the pretraining model)
  classifier   probabilities, label ids and names, or a regression score
               (task sentence_prediction)
  squad        answer text, character offsets and score (task squad)
  tagging      entities with type and character offsets (task tagging)
  auto         the kind of the experiment's task
"""

import logging
import os
import re
import uuid
from typing import Optional

import tensorflow as tf

from bert_tf import configs
from bert_tf.export import classifier_serving
from bert_tf.export import encoder_serving
from bert_tf.export import fill_mask_serving
from bert_tf.export import text_encoding

KINDS = ("auto", "encoder", "fill_mask", "classifier", "squad", "tagging")
_TASK_KINDS = {
    "pretraining": "fill_mask",
    "sentence_prediction": "classifier",
    "squad": "squad",
    "tagging": "tagging",
}
# Items no serving signature uses; a checkpoint may lack them.
_OPTIONAL_ITEMS = ("next_sentence",)


def next_version(export_base: str) -> int:
  """1 + the largest integer directory name in export_base (1 if there is none)."""
  if not tf.io.gfile.isdir(export_base):
    return 1
  versions = [int(name.rstrip("/")) for name in tf.io.gfile.listdir(export_base)
              if re.fullmatch(r"\d+/?", name)]
  return max(versions, default=0) + 1


def write_saved_model(module, export_base: str, version: Optional[int] = None) -> str:
  """Saves a ServingModule with its signatures as EXPORT_BASE/<version>/.

  Args:
    module: a `bert_tf.export.serving_module.ServingModule`.
    export_base: the model's base directory (what TF Serving's model_base_path names).
    version: integer version; None takes `next_version(export_base)`.

  Returns:
    The path of the written version directory.

  Raises:
    FileExistsError: the version directory exists already.
  """
  version = next_version(export_base) if version is None else int(version)
  if version < 0:
    raise ValueError(f"version must be a non-negative integer, got {version}")
  final = os.path.join(export_base, str(version))
  if tf.io.gfile.exists(final):
    raise FileExistsError(f"Export directory {final} exists already; choose another version")
  tf.io.gfile.makedirs(export_base)
  temporary = os.path.join(export_base, f".tmp-{version}-{uuid.uuid4().hex}")
  try:
    tf.saved_model.save(module, temporary, signatures=module.signatures())
    tf.io.gfile.rename(temporary, final)
  finally:
    if tf.io.gfile.exists(temporary):
      tf.io.gfile.rmtree(temporary)
  logging.info("Exported %s to %s", type(module).__name__, final)
  return final


def kind_of(experiment: configs.ExperimentConfig, kind: str = "auto") -> str:
  """The export kind for an experiment ('auto' resolves from task.name)."""
  if kind not in KINDS:
    raise ValueError(f"kind must be one of {KINDS}, got '{kind}'")
  if kind != "auto":
    return kind
  name = experiment.task.name
  if name not in _TASK_KINDS:
    raise ValueError(f"No serving export for task '{name}'; tasks with one: "
                     f"{', '.join(sorted(_TASK_KINDS))} (or kind 'encoder')")
  return _TASK_KINDS[name]


def is_pair_task(experiment: configs.ExperimentConfig) -> bool:
  """Whether a sentence_prediction task reads sentence pairs."""
  task = experiment.task
  glue_task = getattr(task, "glue_task", "")
  if glue_task:
    from bert_tf.data import glue  # pylint: disable=g-import-not-at-top
    return bool(glue.GLUE_TASKS[glue_task].text_b)
  return bool(getattr(task, "text_b_column", ""))


def data_config_for_export(experiment: configs.ExperimentConfig) -> configs.DataConfig:
  """The data section whose vocab and seq_length an export uses (eval, else train)."""
  if experiment.eval_data.vocab_file or not experiment.train_data.vocab_file:
    return experiment.eval_data
  return experiment.train_data


def build_serving_module(experiment: configs.ExperimentConfig, model, vocab_file: str,
                         kind: str = "auto", lower_case: Optional[bool] = None,
                         seq_length: Optional[int] = None, top_k: int = 5,
                         max_masks: Optional[int] = None):
  """Wraps a model in the ServingModule of its kind.

  Args:
    experiment: the experiment config the model was built from.
    model: the task's Keras model (for kind 'encoder', any model with an
      `encoder` attribute, or a BertEncoder).
    vocab_file: the WordPiece vocab the model was trained with.
    kind: one of KINDS.
    lower_case: None takes the data config's.
    seq_length: packed length T; None takes the data config's.
    top_k, max_masks: fill-mask settings (max_masks None: the data config's
      max_predictions_per_seq).

  Returns:
    A ServingModule.
  """
  from bert_tf.text.tokenizer import BertWordPieceTokenizer  # pylint: disable=g-import-not-at-top
  data = data_config_for_export(experiment)
  lower_case = data.lower_case if lower_case is None else lower_case
  seq_length = seq_length or data.seq_length
  max_position = experiment.model.encoder.max_position_embeddings
  if seq_length > max_position:
    raise ValueError(f"seq_length {seq_length} exceeds max_position_embeddings {max_position}")
  tokenizer = BertWordPieceTokenizer(vocab_file, lower_case=lower_case)
  vocab_size = experiment.model.encoder.vocab_size
  if tokenizer.vocab_size != vocab_size:
    raise ValueError(f"Vocab {vocab_file} has {tokenizer.vocab_size} tokens but the model's "
                     f"vocab_size is {vocab_size}")
  text_encoder = text_encoding.TextEncoder(tokenizer, seq_length)
  kind = kind_of(experiment, kind)
  if kind == "encoder":
    encoder = getattr(model, "encoder", model)
    return encoder_serving.EncoderServing(encoder, text_encoder)
  if kind == "fill_mask":
    return fill_mask_serving.FillMaskServing(
        model, text_encoder, top_k=top_k,
        max_masks=max_masks or max(data.max_predictions_per_seq, 1))
  if kind == "classifier":
    from bert_tf.tasks import base  # pylint: disable=g-import-not-at-top
    task = base.get_task(experiment)
    return classifier_serving.ClassifierServing(model, text_encoder,
                                                label_names=task.label_names,
                                                pair=is_pair_task(experiment))
  if kind == "squad":
    from bert_tf.export import squad_serving  # pylint: disable=g-import-not-at-top
    task = experiment.task
    return squad_serving.SquadServing(
        model, text_encoder, max_query_length=task.max_query_length,
        max_answer_length=task.max_answer_length,
        version_2_with_negative=task.version_2_with_negative,
        null_score_diff_threshold=task.null_score_diff_threshold)
  from bert_tf.export import tagging_serving  # pylint: disable=g-import-not-at-top
  return tagging_serving.TaggingServing(model, text_encoder, experiment.task.label_names)


def load_experiment(config) -> configs.ExperimentConfig:
  """An ExperimentConfig from itself or a YAML path, in float32 for serving."""
  if isinstance(config, str):
    config = configs.ExperimentConfig.from_yaml(config)
  # Serving computes in float32 whatever precision training used; weights are float32.
  return config.override({"runtime": {"mixed_precision_dtype": "float32"}})


def model_from_checkpoint(experiment: configs.ExperimentConfig, checkpoint: str):
  """Builds the experiment's task model and restores every checkpoint item it has.

  Args:
    experiment: the experiment config.
    checkpoint: a checkpoint prefix, or a directory (its latest checkpoint).

  Returns:
    The Keras model with restored weights.

  Raises:
    KeyError: the checkpoint lacks an item the model serves with (naming both sets).
  """
  from bert_tf.tasks import base  # pylint: disable=g-import-not-at-top
  from bert_tf.training import checkpoints  # pylint: disable=g-import-not-at-top
  model = base.get_task(experiment).build_model()
  prefix = checkpoints.resolve_checkpoint(checkpoint)
  available = checkpoints.checkpoint_children(prefix)
  items = [name for name in model.checkpoint_items
           if name in available or name not in _OPTIONAL_ITEMS]
  checkpoints.restore_items(prefix, model.checkpoint_items, items=tuple(items))
  return model


def export_from_checkpoint(checkpoint: str, config, export_base: str,
                           vocab_file: Optional[str] = None, kind: str = "auto",
                           version: Optional[int] = None, **serving_args) -> str:
  """Restores a checkpoint and exports it for TF Serving.

  Args:
    checkpoint: checkpoint prefix or directory (trainer or converted checkpoint).
    config: ExperimentConfig or the path of its YAML (e.g. model_dir/params.yaml).
    export_base: base directory; the export goes to export_base/<version>/.
    vocab_file: None takes the data config's vocab_file.
    kind: one of KINDS.
    version: None takes the next free integer.
    **serving_args: lower_case, seq_length, top_k, max_masks for build_serving_module.

  Returns:
    The version directory written.
  """
  experiment = load_experiment(config)
  vocab_file = vocab_file or data_config_for_export(experiment).vocab_file
  if not vocab_file:
    raise ValueError("No vocab file: pass one, or set the data config's vocab_file")
  model = model_from_checkpoint(experiment, checkpoint)
  module = build_serving_module(experiment, model, vocab_file, kind=kind, **serving_args)
  return write_saved_model(module, export_base, version)

