"""Converts BERT checkpoints between bert_tf, the Google TF1 release and Hugging Face.

Reading any format gives a bert_tf Keras model (a BertPretrainer when the checkpoint has
the pretraining heads, a BertEncoder otherwise) whose variables are assigned one by one
through the table in `name_map`; writing any format reads the variables back through the
same table. Every shape, the vocab size and the set of names are checked before anything
is assigned, and output folders appear only once complete.

A bert_tf checkpoint folder, as `save_bert_tf` writes it:
  ckpt-1.index, ckpt-1.data-*, checkpoint   tf.train.Checkpoint whose root children are the
                                            model's checkpoint_items (encoder, masked_lm,
                                            next_sentence)
  config.yaml                               `model: encoder: ...`, mergeable into any
                                            experiment with tools/train.py --config_file
  vocab.txt
A trainer's model_dir (ckpt-N.*, params.yaml) reads the same way.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import time
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
import yaml

from bert_tf import configs
from bert_tf.checkpoints import bert_config
from bert_tf.checkpoints import google_tf1
from bert_tf.checkpoints import huggingface
from bert_tf.checkpoints import name_map
from bert_tf.checkpoints import restore
from bert_tf.checkpoints.files import (BERT_TF, FORMATS, GOOGLE_TF1, HUGGINGFACE, VOCAB_FILE,
                                       ConversionError, RawCheckpoint, atomic_output_dir,
                                       count_vocab)
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_pretrainer import BertPretrainer

logger = logging.getLogger(__name__)

CONFIG_YAML = "config.yaml"
TRAINER_CONFIG_YAML = "params.yaml"
CHECKPOINT_NAME = "ckpt"


@dataclasses.dataclass
class LoadedCheckpoint:
  """A checkpoint as a bert_tf model.

  Attributes:
    model: BertPretrainer when the masked-LM head was present, else BertEncoder.
    encoder_config: the encoder's hyperparameters.
    vocab_file: the vocab.txt that goes with it, or None when none was found.
    items: the checkpoint items it holds, e.g. ("encoder", "masked_lm", "next_sentence").
    source: the path read.
    source_format: bert_tf, google_tf1 or huggingface.
  """

  model: object
  encoder_config: configs.EncoderConfig
  vocab_file: Optional[str]
  items: Tuple[str, ...]
  source: str
  source_format: str


@dataclasses.dataclass
class ConversionSummary:
  """What one conversion did."""

  input_path: str
  input_format: str
  output_dir: str
  output_format: str
  items: Tuple[str, ...]
  num_variables: int
  num_parameters: int
  seconds: float

  def line(self) -> str:
    return (f"Converted {self.input_format} {self.input_path} -> {self.output_format} "
            f"{self.output_dir}: {'+'.join(self.items)}, {self.num_variables} variables, "
            f"{self.num_parameters:,} parameters in {self.seconds:.1f} s")


# --------------------------------------------------------------------------------------
# Models and their variables.


def build_model(encoder_config: configs.EncoderConfig,
                items: Sequence[str] = (name_map.ENCODER,)):
  """Builds the bert_tf model whose checkpoint_items are `items`.

  Returns:
    BertPretrainer (with the next-sentence head when "next_sentence" is in items) when
    "masked_lm" is in items, else BertEncoder.
  """
  if name_map.NEXT_SENTENCE in items and name_map.MASKED_LM not in items:
    raise ConversionError("The checkpoint has a next-sentence head but no masked-LM head; "
                          "bert_tf models hold the next-sentence head only beside it.")
  encoder = BertEncoder.from_config_object(encoder_config)
  if name_map.MASKED_LM in items:
    return BertPretrainer(encoder, use_next_sentence_label=name_map.NEXT_SENTENCE in items)
  return encoder


def encoder_of(model) -> BertEncoder:
  """The BertEncoder of a BertEncoder or of a model that holds one as `encoder`."""
  if isinstance(model, BertEncoder):
    return model
  encoder = model.checkpoint_items.get(name_map.ENCODER)
  if not isinstance(encoder, BertEncoder):
    raise ConversionError(f"{type(model).__name__} has no BertEncoder under checkpoint item "
                          f"'{name_map.ENCODER}'")
  return encoder


def variables_by_path(model) -> Dict[str, tf.Variable]:
  """{variable.path: variable} of every weight of `model` (a shared variable once)."""
  out = {}
  for variable in model.weights:
    if variable.path in out and out[variable.path] is not variable:
      raise ConversionError(f"Two variables of {model.name} share the path {variable.path}")
    out[variable.path] = variable
  return out


def _model_rows(model, items: Optional[Sequence[str]] = None):
  """The table rows of `model`, checked to cover exactly its variables."""
  model_items = tuple(model.checkpoint_items)
  items = tuple(items) if items is not None else model_items
  unknown = [item for item in items if item not in name_map.ITEMS]
  if unknown:
    raise ConversionError(f"Checkpoint items {unknown} have no Hugging Face or TF1 names; "
                          f"convertible items: {', '.join(name_map.ITEMS)}")
  rows = name_map.weight_names(encoder_of(model).num_layers, items)
  variables = variables_by_path(model)
  missing = [row.bert_tf for row in rows if row.bert_tf not in variables]
  if missing:
    raise ConversionError(f"{model.name} lacks variables the table expects: {missing}")
  if set(items) == set(model_items):
    extra = sorted(set(variables) - {row.bert_tf for row in rows})
    if extra:
      raise ConversionError(f"{model.name} has variables that the table does not name: "
                            f"{extra}")
  return rows, variables


def model_arrays(model, fmt: str, items: Optional[Sequence[str]] = None
                 ) -> Dict[str, np.ndarray]:
  """The model's weights under the names and layout of `fmt`.

  Args:
    model: a BertEncoder or BertPretrainer.
    fmt: bert_tf, google_tf1 or huggingface. Hugging Face names carry the "bert." prefix
      when the masked-LM head is included (BertForPreTraining style), none otherwise
      (BertModel style).
    items: the checkpoint items to include; default: all of the model's.

  Returns:
    {name: float32 array}.
  """
  rows, variables = _model_rows(model, items)
  with_prefix = any(row.item == name_map.MASKED_LM for row in rows)
  out = {}
  for row in rows:
    array = np.asarray(variables[row.bert_tf].numpy())
    if row.transposed_in(fmt):
      array = array.T
    name = (name_map.hf_file_name(row, with_prefix) if fmt == HUGGINGFACE
            else row.name_in(fmt))
    out[name] = np.ascontiguousarray(array)
  return out


# --------------------------------------------------------------------------------------
# Reading.


def detect_format(path: str) -> str:
  """Guesses the format of the checkpoint at `path` (a folder, prefix or weights file)."""
  if not os.path.exists(path) and not tf.io.gfile.exists(path + ".index"):
    raise ConversionError(f"Checkpoint not found: {path}")
  if os.path.isdir(path) and huggingface.is_huggingface_folder(path):
    return HUGGINGFACE
  if os.path.isfile(path) and path.endswith((".safetensors", ".bin", ".index.json")):
    return HUGGINGFACE
  try:
    prefix = google_tf1.find_checkpoint_prefix(path)
  except ConversionError:
    raise ConversionError(f"Cannot tell the format of {path}: not a Hugging Face folder "
                          f"(config.json + {' or '.join(huggingface.WEIGHT_FILES)}) and no "
                          "TensorFlow checkpoint. Pass the input format.") from None
  names = [name for name, _ in tf.train.list_variables(prefix)]
  if any(name.split("/", 1)[0] in name_map.ITEMS for name in names):
    return BERT_TF
  if any(name.startswith(("bert/", "cls/")) for name in names):
    return GOOGLE_TF1
  raise ConversionError(f"{prefix} is neither a bert_tf checkpoint (no root item named "
                        f"{', '.join(name_map.ITEMS)}) nor an original BERT checkpoint "
                        "(no variable under bert/ or cls/).")


def read_checkpoint(path: str, input_format: str = "auto",
                    config_file: Optional[str] = None,
                    vocab_file: Optional[str] = None) -> LoadedCheckpoint:
  """Reads a checkpoint of any supported format into a bert_tf model.

  Args:
    path: a folder, checkpoint prefix or weights file.
    input_format: auto, bert_tf, google_tf1 or huggingface.
    config_file: the model config (bert_config.json, config.json, or for bert_tf a YAML
      with model.encoder); default: the one beside the checkpoint.
    vocab_file: default: the vocab.txt beside the checkpoint.

  Raises:
    ConversionError: naming the file, variable and shapes at fault.
  """
  fmt = detect_format(path) if input_format == "auto" else input_format
  if fmt not in FORMATS:
    raise ConversionError(f"Unknown input format '{fmt}'; formats: auto, {', '.join(FORMATS)}")
  logger.info("Reading %s checkpoint %s", fmt, path)
  if fmt == BERT_TF:
    return _read_bert_tf(path, config_file, vocab_file)
  if fmt == GOOGLE_TF1:
    raw = google_tf1.read_google_tf1(path, config_file, vocab_file)
  else:
    raw = huggingface.read_huggingface(path, config_file, vocab_file)
  return model_from_raw(raw)


def model_from_raw(raw: RawCheckpoint,
                   encoder_config: Optional[configs.EncoderConfig] = None) -> LoadedCheckpoint:
  """Builds the bert_tf model that `raw` describes and assigns its weights.

  Args:
    raw: arrays under Google TF1 or Hugging Face names, with the config they came with.
    encoder_config: overrides the config read from the checkpoint's config file.

  Raises:
    ConversionError: when the config is missing, a required variable is missing, a
      variable is not expected, a shape disagrees with the config, or the vocab size
      disagrees with the embedding table. Nothing is assigned in those cases.
  """
  if encoder_config is None:
    if raw.bert_config is None:
      raise ConversionError(f"No model config found for {raw.source}; pass the "
                            "bert_config.json / config.json file.")
    encoder_config = bert_config.from_bert_config(raw.bert_config, source=raw.source)
  arrays, original = _canonical_arrays(raw)
  items = name_map.items_present(arrays, raw.fmt)
  if name_map.ENCODER not in items:
    raise ConversionError(f"{raw.source} holds no BERT encoder weights; found: "
                          f"{_preview(original.values())}")
  rows = name_map.weight_names(encoder_config.num_layers, items)
  by_name = name_map.rows_by_name(rows, raw.fmt)
  missing = [name for name in by_name if name not in arrays]
  unexpected = [original[name] for name in arrays if name not in by_name]
  if missing or unexpected:
    raise ConversionError(_name_mismatch_message(raw, encoder_config, missing, unexpected))

  model = build_model(encoder_config, items)
  variables = variables_by_path(model)
  assignments = []
  for name, row in by_name.items():
    array = arrays[name]
    target = variables[row.bert_tf]
    want = tuple(target.shape)
    transposed = row.transposed_in(raw.fmt)
    want_in_file = tuple(reversed(want)) if transposed else want
    if tuple(array.shape) != want_in_file:
      raise ConversionError(
          f"{raw.source}: variable {original[name]} has shape {list(array.shape)} but the "
          f"config (num_layers={encoder_config.num_layers}, hidden_size="
          f"{encoder_config.hidden_size}, intermediate_size={encoder_config.intermediate_size}"
          f", vocab_size={encoder_config.vocab_size}, max_position_embeddings="
          f"{encoder_config.max_position_embeddings}, type_vocab_size="
          f"{encoder_config.type_vocab_size}) needs {list(want_in_file)} for {row.bert_tf}")
    assignments.append((target, array.T if transposed else array))

  if raw.vocab_file:
    _check_vocab(raw.vocab_file, encoder_config.vocab_size, raw.source)
  if len(assignments) != len(variables):
    unassigned = sorted(set(variables) - {row.bert_tf for row in rows})
    raise ConversionError(f"The table leaves model variables unassigned: {unassigned}")
  for target, array in assignments:
    target.assign(array.astype(np.float32))
  logger.info("Assigned %d variables (%s)", len(assignments), "+".join(items))
  return LoadedCheckpoint(model, encoder_config, raw.vocab_file, items, raw.source, raw.fmt)


def _canonical_arrays(raw: RawCheckpoint):
  """Renames Hugging Face aliases to the table's names and resolves tied copies.

  Returns:
    ({canonical name: array}, {canonical name: name in the file}).
  """
  if raw.fmt == GOOGLE_TF1:
    return dict(raw.weights), {name: name for name in raw.weights}
  arrays, original = {}, {}
  for name, array in raw.weights.items():
    if name_map.HF_IGNORED.match(name):
      continue
    canonical = name_map.canonical_hf_name(name)
    if canonical in arrays:
      raise ConversionError(f"{raw.source}: both {original[canonical]} and {name} hold "
                            f"{canonical}")
    arrays[canonical], original[canonical] = array, name
  embeddings = "embeddings.word_embeddings.weight"
  decoder = arrays.pop(name_map.HF_TIED_DECODER_WEIGHT, None)
  if decoder is not None:
    original.pop(name_map.HF_TIED_DECODER_WEIGHT)
    if embeddings in arrays and not np.array_equal(decoder, arrays[embeddings]):
      raise ConversionError(
          f"{raw.source}: {name_map.HF_TIED_DECODER_WEIGHT} (shape {list(decoder.shape)}) "
          f"differs from {embeddings} (shape {list(arrays[embeddings].shape)}); bert_tf ties "
          "the masked-LM output matrix to the word embeddings.")
  bias_name = "cls.predictions.bias"
  decoder_bias = arrays.pop(name_map.HF_TIED_DECODER_BIAS, None)
  if decoder_bias is not None:
    decoder_bias_file_name = original.pop(name_map.HF_TIED_DECODER_BIAS)
    if bias_name not in arrays:
      arrays[bias_name], original[bias_name] = decoder_bias, decoder_bias_file_name
    elif not np.array_equal(decoder_bias, arrays[bias_name]):
      raise ConversionError(f"{raw.source}: {decoder_bias_file_name} differs from "
                            f"{original[bias_name]}; they are one bias in bert_tf.")
  return arrays, original


def _name_mismatch_message(raw, config, missing, unexpected) -> str:
  parts = [f"{raw.source} does not match the config (num_layers={config.num_layers})."]
  if missing:
    parts.append(f"Missing {len(missing)} required variables: {_preview(missing)}.")
  if unexpected:
    parts.append(f"{len(unexpected)} unexpected variables: {_preview(unexpected)}.")
  layers = {name_map.layer_index(name, raw.fmt) for name in unexpected + missing}
  layers.discard(None)
  if layers:
    parts.append(f"Layer indices involved: {sorted(layers)}; check num_hidden_layers.")
  return " ".join(parts)


def _preview(names, limit: int = 20) -> str:
  names = sorted(names)
  shown = ", ".join(names[:limit])
  return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def _check_vocab(vocab_file: str, vocab_size: int, source: str) -> None:
  size = count_vocab(vocab_file)
  if size != vocab_size:
    raise ConversionError(f"Vocab {vocab_file} has {size} tokens but the word-embedding table "
                          f"of {source} (embeddings/word_embeddings) has {vocab_size} rows.")


def _read_bert_tf(path: str, config_file: Optional[str], vocab_file: Optional[str]
                  ) -> LoadedCheckpoint:
  try:
    prefix = restore.resolve_checkpoint(
        path[:-len(".index")] if path.endswith(".index") else path)
  except FileNotFoundError as e:
    raise ConversionError(str(e)) from None
  folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(prefix))
  if config_file is None:
    # A converted folder has config.yaml; a trainer's model_dir has params.yaml.
    candidates = [os.path.join(folder, name) for name in (CONFIG_YAML, TRAINER_CONFIG_YAML)]
    config_file = next((c for c in candidates if os.path.isfile(c)), candidates[0])
  try:
    data = configs.load_yaml(config_file)
    encoder_config = configs.EncoderConfig.from_dict(
        (data.get("model") or {}).get("encoder") or {}, path="model.encoder")
  except configs.ConfigError as e:
    raise ConversionError(f"{config_file}: {e}") from None
  roots = restore.checkpoint_children(prefix)
  items = tuple(item for item in name_map.ITEMS if item in roots)
  if name_map.ENCODER not in items:
    raise ConversionError(f"{prefix} has no '{name_map.ENCODER}' item; it has {sorted(roots)}")
  model = build_model(encoder_config, items)
  try:
    restore.restore_items(prefix, model.checkpoint_items, items=items)
  except (AssertionError, KeyError, ValueError, tf.errors.OpError) as e:
    raise ConversionError(f"{prefix} does not fit the model of {config_file}: {e}") from None
  vocab_file = vocab_file or (os.path.join(folder, VOCAB_FILE)
                              if os.path.isfile(os.path.join(folder, VOCAB_FILE)) else None)
  if vocab_file:
    _check_vocab(vocab_file, encoder_config.vocab_size, prefix)
  return LoadedCheckpoint(model, encoder_config, vocab_file, items, prefix, BERT_TF)


# --------------------------------------------------------------------------------------
# Writing.


def save_bert_tf(model, vocab_file: str, output_dir: str, overwrite: bool = False) -> str:
  """Writes a bert_tf checkpoint folder (see the module docstring).

  Returns:
    The checkpoint prefix, `<output_dir>/ckpt-1`.
  """
  encoder_config = encoder_of(model).encoder_config()
  _check_vocab(vocab_file, encoder_config.vocab_size, model.name)
  with atomic_output_dir(output_dir, overwrite) as tmp:
    checkpoint = tf.train.Checkpoint(**model.checkpoint_items)
    manager = tf.train.CheckpointManager(checkpoint, tmp, max_to_keep=1,
                                         checkpoint_name=CHECKPOINT_NAME)
    prefix = manager.save()
    with open(os.path.join(tmp, CONFIG_YAML), "w", encoding="utf-8") as f:
      yaml.safe_dump({"model": {"encoder": encoder_config.as_dict()}}, f, sort_keys=False)
    shutil.copyfile(vocab_file, os.path.join(tmp, VOCAB_FILE))
  return os.path.join(os.path.abspath(output_dir), os.path.basename(prefix))


def huggingface_config(model) -> Dict[str, object]:
  """The config.json of `model` as Hugging Face transformers reads it."""
  items = tuple(model.checkpoint_items)
  config = bert_config.to_bert_config(encoder_of(model).encoder_config())
  if name_map.NEXT_SENTENCE in items:
    architecture = "BertForPreTraining"
  elif name_map.MASKED_LM in items:
    architecture = "BertForMaskedLM"
  else:
    architecture = "BertModel"
  config.update(architectures=[architecture], model_type="bert", pad_token_id=0,
                position_embedding_type="absolute")
  return config


def save_huggingface(model, vocab_file: str, output_dir: str, overwrite: bool = False) -> str:
  """Writes config.json, model.safetensors and vocab.txt of a Hugging Face BERT.

  With the heads, names are BertForPreTraining's ("bert." prefix, cls.*); the tied
  decoder matrix is not stored, as transformers itself saves it.
  """
  arrays = model_arrays(model, HUGGINGFACE)
  _check_vocab(vocab_file, encoder_of(model).vocab_size, model.name)
  with atomic_output_dir(output_dir, overwrite) as tmp:
    huggingface.write_huggingface(arrays, huggingface_config(model), tmp)
    shutil.copyfile(vocab_file, os.path.join(tmp, VOCAB_FILE))
  return os.path.abspath(output_dir)


def save_google_tf1(model, vocab_file: str, output_dir: str, overwrite: bool = False) -> str:
  """Writes bert_model.ckpt, bert_config.json and vocab.txt as the original release."""
  import json  # pylint: disable=g-import-not-at-top
  arrays = model_arrays(model, GOOGLE_TF1)
  _check_vocab(vocab_file, encoder_of(model).vocab_size, model.name)
  with atomic_output_dir(output_dir, overwrite) as tmp:
    google_tf1.write_google_tf1(arrays, os.path.join(tmp, google_tf1.CHECKPOINT_PREFIX))
    with open(os.path.join(tmp, google_tf1.CONFIG_FILE), "w", encoding="utf-8") as f:
      json.dump(bert_config.to_bert_config(encoder_of(model).encoder_config()), f, indent=2)
      f.write("\n")
    shutil.copyfile(vocab_file, os.path.join(tmp, VOCAB_FILE))
  return os.path.join(os.path.abspath(output_dir), google_tf1.CHECKPOINT_PREFIX)


_WRITERS = {BERT_TF: save_bert_tf, HUGGINGFACE: save_huggingface, GOOGLE_TF1: save_google_tf1}


def save_checkpoint(model, vocab_file: str, output_dir: str, output_format: str = BERT_TF,
                    overwrite: bool = False) -> str:
  """Writes `model` in `output_format` (bert_tf, huggingface or google_tf1)."""
  if output_format not in _WRITERS:
    raise ConversionError(f"Unknown output format '{output_format}'; formats: "
                          f"{', '.join(FORMATS)}")
  return _WRITERS[output_format](model, vocab_file, output_dir, overwrite)


def convert_checkpoint(input_path: str, output_dir: str, input_format: str = "auto",
                       output_format: str = BERT_TF, config_file: Optional[str] = None,
                       vocab_file: Optional[str] = None,
                       overwrite: bool = False) -> ConversionSummary:
  """Reads a checkpoint in one format and writes it in another.

  Args:
    input_path: a folder, checkpoint prefix or weights file.
    output_dir: the folder to create (it must not exist unless `overwrite`).
    input_format: auto, bert_tf, google_tf1 or huggingface.
    output_format: bert_tf, google_tf1 or huggingface.
    config_file: overrides the config found beside the input.
    vocab_file: overrides the vocab.txt found beside the input; one is required.

  Returns:
    A ConversionSummary.
  """
  start = time.time()
  loaded = read_checkpoint(input_path, input_format, config_file, vocab_file)
  if loaded.vocab_file is None:
    raise ConversionError(f"No {VOCAB_FILE} beside {input_path}; pass the vocab file.")
  logger.info("Writing %s checkpoint to %s", output_format, output_dir)
  save_checkpoint(loaded.model, loaded.vocab_file, output_dir, output_format, overwrite)
  weights = loaded.model.weights
  return ConversionSummary(
      input_path=input_path, input_format=loaded.source_format, output_dir=output_dir,
      output_format=output_format, items=loaded.items, num_variables=len(weights),
      num_parameters=int(sum(np.prod(w.shape) for w in weights)),
      seconds=time.time() - start)
