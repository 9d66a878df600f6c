"""A checkpoint's arrays as a bert_tf model: the model of the checkpoint's architecture
built and each array assigned through `name_map`, every shape, the vocab size and the set
of names checked before anything is assigned (`model_from_raw`), and what a read gives
(`LoadedCheckpoint`). bert_tf.checkpoints.reading reads each format into these arrays.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Optional, Tuple

import numpy as np

from bert_tf import configs
from bert_tf.checkpoints import architectures
from bert_tf.checkpoints import bert_config
from bert_tf.checkpoints import name_map
from bert_tf.checkpoints import variables as variables_lib
from bert_tf.checkpoints.files import GOOGLE_TF1, HUGGINGFACE, ConversionError, RawCheckpoint, check_vocab

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class LoadedCheckpoint:
  """A checkpoint as a bert_tf model.

  Attributes:
    model: the model of the checkpoint's architecture (bert_tf.checkpoints.architectures):
      BertEncoder, BertPretrainer or a task model (BertClassifier, ...).
    encoder_config: the encoder's hyperparameters.
    vocab_file: the vocab.txt that goes with it, or None when none was found.
    items: the checkpoint items it holds, e.g. ("encoder", "masked_lm", "next_sentence").
    source: the path read.
    source_format: bert_tf, google_tf1, huggingface or keras_hub.
    settings: the head's label names and dropout, and the tokenizer's case.
  """

  model: object
  encoder_config: configs.EncoderConfig
  vocab_file: Optional[str]
  items: Tuple[str, ...]
  source: str
  source_format: str
  settings: architectures.HeadSettings = dataclasses.field(
      default_factory=architectures.HeadSettings)


def model_from_raw(raw: RawCheckpoint,
                   encoder_config: Optional[configs.EncoderConfig] = None,
                   settings: Optional[architectures.HeadSettings] = None) -> LoadedCheckpoint:
  """Builds the bert_tf model that `raw` describes and assigns its weights.

  The model is the one of the checkpoint's architecture (its config's class where it
  names one, else the heads its names show): an encoder, a pretrainer or a task model,
  whose head takes its width (classes, tags) from the stored head. Where the
  Hugging Face class has no pooler (token tagging, question answering, masked LM), ours
  is set as a fresh one is: normal(0, initializer_range) kernel, zero bias.

  Args:
    raw: arrays under Google TF1, Hugging Face or KerasHub names, with the config they
      came with.
    encoder_config: overrides the config read from the checkpoint's config file.
    settings: the head's settings (labels, dropout, case); default: from the Hugging
      Face config, or the defaults.

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
  architecture = _architecture(raw, arrays)
  rows = name_map.weight_names(encoder_config.num_layers, architecture.items)
  fill_pooler = raw.fmt == HUGGINGFACE and not architecture.hf_pooler
  if fill_pooler:
    rows = [row for row in rows if row not in architectures.pooler_rows(rows)]
  try:
    by_name = name_map.rows_by_name(rows, raw.fmt)
  except ValueError as e:
    raise ConversionError(f"{raw.source}: {e}") from None
  missing = [name for name in by_name if name not in arrays]
  unexpected = [original[name] for name in arrays if name not in by_name]
  if missing or unexpected:
    raise ConversionError(_name_mismatch_message(raw, encoder_config, missing, unexpected))

  num_classes = _head_width(architecture, by_name, arrays, raw.fmt)
  if settings is None:
    settings = (architectures.settings_from_huggingface(
        raw.bert_config or {}, architecture, num_classes, raw.source)
                if raw.fmt == HUGGINGFACE else architectures.HeadSettings())
  if raw.lower_case is not None:
    settings = dataclasses.replace(settings, lower_case=raw.lower_case)
  _say_unnamed_tags(raw, architecture, settings, num_classes)
  model = variables_lib.build_model(encoder_config, architecture.items, num_classes, settings)
  variables = variables_lib.variables_by_path(model)
  assignments = []
  for name, row in by_name.items():
    array = arrays[name]
    target = variables[row.bert_tf]
    want = tuple(target.shape)
    transposed = row.transposed_in(raw.fmt)
    want_in_file = tuple(reversed(want)) if transposed else want
    fits = (array.size == np.prod(want) if row.reshaped_in(raw.fmt)
            else tuple(array.shape) == want_in_file)
    if not fits:
      raise ConversionError(
          f"{raw.source}: variable {original[name]} has shape {list(array.shape)} but the "
          f"config (num_layers={encoder_config.num_layers}, hidden_size="
          f"{encoder_config.hidden_size}, intermediate_size={encoder_config.intermediate_size}"
          f", vocab_size={encoder_config.vocab_size}, max_position_embeddings="
          f"{encoder_config.max_position_embeddings}, type_vocab_size="
          f"{encoder_config.type_vocab_size}) needs {list(want_in_file)} for {row.bert_tf}")
    assignments.append((target, (array.T if transposed else array).reshape(want)))
  if fill_pooler:
    assignments.extend(_fresh_pooler(variables, encoder_config))

  if raw.vocab_file:
    check_vocab(raw.vocab_file, encoder_config.vocab_size, raw.source)
  if len(assignments) != len(variables):
    unassigned = sorted(set(variables) - {row.bert_tf for row in rows})
    raise ConversionError(f"The table leaves model variables unassigned: {unassigned}")
  for target, array in assignments:
    target.assign(array.astype(np.float32))
  logger.info("Assigned %d variables (%s)", len(assignments), "+".join(architecture.items))
  return LoadedCheckpoint(model, encoder_config, raw.vocab_file, architecture.items,
                          raw.source, raw.fmt, settings)


def _say_unnamed_tags(raw: RawCheckpoint, architecture: architectures.Architecture,
                      settings: architectures.HeadSettings, num_classes: int) -> None:
  """Logs one warning where a token classifier's config names no tags (transformers'
  default id2label, LABEL_0, ...): the converted tagger keeps those names, and its
  export serves them, each an entity type of its own (no `O`, no B-/I- spans)."""
  if (architecture.task != architectures.TAGGING
      or architectures.label_names(architecture, settings, num_classes)
      != architectures.default_label_names(num_classes)):
    return
  logger.warning(
      "%s: its config names no tags (transformers' default id2label, LABEL_0 ... LABEL_%d): "
      "the tagger keeps these names and an export serves them, each an entity type of its "
      "own; to name them, set id2label in its config.json (e.g. {\"0\": \"O\", \"1\": \"B-PER\", "
      "\"2\": \"I-PER\"}) and convert again", raw.source, num_classes - 1)


def _architecture(raw: RawCheckpoint, arrays) -> architectures.Architecture:
  """The architecture `raw` holds: the class its config names, else the heads its
  names show."""
  items = name_map.items_present(arrays, raw.fmt)
  if name_map.ENCODER not in items:
    raise ConversionError(f"{raw.source} holds no BERT encoder weights; found: "
                          f"{_preview(raw.weights)}")
  if raw.fmt == HUGGINGFACE:
    return architectures.huggingface_architecture(raw.bert_config or {}, arrays, raw.source)
  if raw.architecture:
    return architectures.of_class_name(raw.architecture, raw.fmt, raw.source)
  return architectures.of_items(items)


def _head_width(architecture, by_name, arrays, fmt: str) -> int:
  """The outputs of the stored fine-tuning head (its kernel's last axis in our
  layout), 0 without one."""
  for name, row in by_name.items():
    if row.item == architecture.head and row.bert_tf.endswith("/kernel"):
      shape = arrays[name].shape
      return int(shape[0] if row.transposed_in(fmt) else shape[-1])
  return 0


def _fresh_pooler(variables, encoder_config: configs.EncoderConfig):
  """(variable, array) pairs that set the pooler as a fresh model's: a kernel drawn
  from normal(0, initializer_range) with a fixed seed, so that conversions repeat, and
  a zero bias."""
  rng = np.random.default_rng(0)
  out = []
  for path, variable in variables.items():
    if path == "pooler/kernel":
      out.append((variable, encoder_config.initializer_range
                  * rng.standard_normal(tuple(variable.shape))))
    elif path == "pooler/bias":
      out.append((variable, np.zeros(tuple(variable.shape))))
  return out


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
