"""Reads and writes KerasHub BERT presets: a `BertBackbone` (an encoder) or a
`BertTextClassifier` (sentence classification), with the vocabulary.

A preset folder, as keras_hub's `save_to_preset` writes it, holds `config.json` (the
backbone's class and arguments), `model.weights.h5`, `metadata.json`, `tokenizer.json`
and `assets/tokenizer/vocabulary.txt`, and for a task `task.json`, `task.weights.h5` and
`preprocessor.json`. Reading loads the preset with keras_hub itself (`pip install
keras-hub`), which knows its own weight files, and takes every variable by its path;
writing builds the keras_hub model of the same sizes, assigns ours through the table
(`name_map`, column keras_hub) and saves it with `save_to_preset`.

KerasHub's BERT computes as ours with the tanh approximation of GELU, LayerNorm epsilon
1e-12 and one dropout rate for every dropout of the encoder.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple

import numpy as np

from bert_tf import configs
from bert_tf.checkpoints import architectures
from bert_tf.checkpoints.files import ConversionError, KERAS_HUB, RawCheckpoint, read_json
from bert_tf.checkpoints.variables import encoder_of
from bert_tf.utils import files as files_lib

CONFIG_FILE = "config.json"
METADATA_FILE = "metadata.json"
TASK_FILE = "task.json"
TOKENIZER_FILE = "tokenizer.json"
VOCAB_IN_PRESET = os.path.join("assets", "tokenizer", "vocabulary.txt")
BACKBONE = "BertBackbone"
# What KerasHub's BertBackbone fixes, where ours is a setting.
ACTIVATION = "gelu_approximate"
LAYER_NORM_EPSILON = 1e-12


def is_preset(path: str) -> bool:
  """Whether `path` is a folder that keras_hub's save_to_preset wrote."""
  config = os.path.join(path, CONFIG_FILE)
  if not (files_lib.isdir(path) and files_lib.is_file(config)
          and files_lib.is_file(os.path.join(path, METADATA_FILE))):
    return False
  try:
    return str(read_json(config).get("module", "")).startswith("keras_hub")
  except ConversionError:
    return False


def _keras_hub():
  try:
    import keras_hub  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise ConversionError("KerasHub presets are read and written with keras-hub, which is "
                          "not installed: pip install keras-hub") from None
  return keras_hub


def encoder_config(arguments: Dict[str, Any], source: str) -> configs.EncoderConfig:
  """The EncoderConfig of a BertBackbone's constructor arguments."""
  try:
    return configs.EncoderConfig(
        vocab_size=arguments["vocabulary_size"], hidden_size=arguments["hidden_dim"],
        num_layers=arguments["num_layers"], num_attention_heads=arguments["num_heads"],
        intermediate_size=arguments["intermediate_dim"], hidden_activation=ACTIVATION,
        dropout_rate=arguments.get("dropout", 0.1),
        attention_dropout_rate=arguments.get("dropout", 0.1),
        max_position_embeddings=arguments.get("max_sequence_length", 512),
        type_vocab_size=arguments.get("num_segments", 2),
        layer_norm_epsilon=LAYER_NORM_EPSILON)
  except KeyError as e:
    raise ConversionError(f"{source}: the BertBackbone config has no {e}") from None
  except configs.ConfigError as e:
    raise ConversionError(f"{source}: {e}") from None


def read_preset(path: str, vocab_file: Optional[str] = None
                ) -> Tuple[RawCheckpoint, configs.EncoderConfig, architectures.HeadSettings]:
  """Reads a KerasHub BERT preset's variables.

  Args:
    path: the preset folder.
    vocab_file: default: the preset's assets/tokenizer/vocabulary.txt.

  Returns:
    (RawCheckpoint keyed by KerasHub variable path, as stored; the encoder config; the
    head's dropout and the tokenizer's case).
  """
  config_file = os.path.join(path, CONFIG_FILE)
  config = read_json(config_file)
  if config.get("class_name") != BACKBONE:
    raise ConversionError(f"{config_file}: a {config.get('class_name')} preset; only "
                          f"{BACKBONE} presets (and their tasks) are BERT.")
  arguments = config.get("config") or {}
  encoder = encoder_config(arguments, config_file)
  task_file = os.path.join(path, TASK_FILE)
  task = read_json(task_file) if files_lib.is_file(task_file) else None
  class_name = task.get("class_name") if task else BACKBONE
  architecture = architectures.of_class_name(class_name, KERAS_HUB, path)
  keras_hub = _keras_hub()
  if architecture.keras_hub == BACKBONE:
    model = keras_hub.models.BertBackbone.from_preset(path)
  else:
    model = keras_hub.models.BertTextClassifier.from_preset(path)
  weights = {variable.path: np.asarray(variable.numpy(), np.float32)
             for variable in model.weights}
  settings = architectures.HeadSettings(
      head_dropout_rate=float(((task or {}).get("config") or {}).get("dropout", 0.1)),
      lower_case=_lower_case(path))
  if vocab_file is None and files_lib.is_file(os.path.join(path, VOCAB_IN_PRESET)):
    vocab_file = os.path.join(path, VOCAB_IN_PRESET)
  raw = RawCheckpoint(KERAS_HUB, weights, None, vocab_file, path, architecture=class_name)
  return raw, encoder, settings


def _lower_case(path: str) -> Optional[bool]:
  """`lowercase` of the preset's tokenizer.json, None without one."""
  tokenizer_file = os.path.join(path, TOKENIZER_FILE)
  if not files_lib.is_file(tokenizer_file):
    return None
  value = (read_json(tokenizer_file).get("config") or {}).get("lowercase")
  return value if isinstance(value, bool) else None


def write_preset(model, arrays: Dict[str, np.ndarray], vocab_file: str,
                 settings: architectures.HeadSettings, folder: str) -> None:
  """Writes `model` as a KerasHub preset into the existing local `folder`.

  Args:
    model: a BertEncoder or BertClassifier.
    arrays: its weights under KerasHub names, in our shapes
      (variables.model_arrays(model, "keras_hub")).
    vocab_file: the vocab the preset's tokenizer takes.
    settings: the head's dropout and the tokenizer's case.

  Raises:
    ConversionError: a model KerasHub has no class for, or an encoder that KerasHub's
      BERT does not compute (another activation or LayerNorm epsilon).
  """
  architecture = architectures.of_items(model.checkpoint_items)
  if architecture.keras_hub is None:
    raise ConversionError(f"KerasHub has no BERT model with the items "
                          f"{'+'.join(architecture.items)}; it has {BACKBONE} (the encoder) "
                          "and BertTextClassifier (encoder+classifier).")
  config = encoder_of(model).encoder_config()
  if config.hidden_activation != ACTIVATION or config.layer_norm_epsilon != LAYER_NORM_EPSILON:
    raise ConversionError(
        f"KerasHub's BERT computes hidden_activation {ACTIVATION} and layer_norm_epsilon "
        f"{LAYER_NORM_EPSILON}; {model.name} has {config.hidden_activation} and "
        f"{config.layer_norm_epsilon}.")
  keras_hub = _keras_hub()
  backbone = keras_hub.models.BertBackbone(
      vocabulary_size=config.vocab_size, num_layers=config.num_layers,
      num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
      intermediate_dim=config.intermediate_size, dropout=config.dropout_rate,
      max_sequence_length=config.max_position_embeddings,
      num_segments=config.type_vocab_size)
  lower_case = True if settings.lower_case is None else settings.lower_case
  tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab_file, lowercase=lower_case)
  if architecture.keras_hub == BACKBONE:
    target = backbone
  else:
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
        tokenizer, sequence_length=config.max_position_embeddings)
    target = keras_hub.models.BertTextClassifier(
        backbone, architectures.head_size(model), preprocessor=preprocessor,
        dropout=settings.head_dropout_rate)
  variables = {variable.path: variable for variable in target.weights}
  unassigned = sorted(set(variables) - set(arrays))
  unknown = sorted(set(arrays) - set(variables))
  if unassigned or unknown:
    raise ConversionError(f"The table and KerasHub's {architecture.keras_hub} disagree: "
                          f"KerasHub variables without a value {unassigned}, values without "
                          f"a KerasHub variable {unknown}")
  for name, array in arrays.items():
    variables[name].assign(array.reshape(tuple(variables[name].shape)))
  target.save_to_preset(folder)
  if target is backbone:
    tokenizer.save_to_preset(folder)
