"""bert_tf models as checkpoints see them: the model for a set of checkpoint items, and its
variables under the names and layouts of each format (through `name_map.TABLE`)."""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

from bert_tf import configs
from bert_tf.checkpoints import architectures
from bert_tf.checkpoints import name_map
from bert_tf.checkpoints import snapshots
from bert_tf.checkpoints.files import HUGGINGFACE, ConversionError
from bert_tf.models.bert_classifier import BertClassifier
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_multiple_choice import BertMultipleChoice
from bert_tf.models.bert_pretrainer import BertPretrainer
from bert_tf.models.bert_span_labeler import BertSpanLabeler
from bert_tf.models.bert_token_classifier import BertTokenClassifier


def build_model(encoder_config: configs.EncoderConfig,
                items: Sequence[str] = (name_map.ENCODER,), num_classes: int = 0,
                settings: Optional[architectures.HeadSettings] = None):
  """Builds the bert_tf model whose checkpoint_items are `items`, as its task does.

  Args:
    encoder_config: the encoder's hyperparameters.
    items: checkpoint items (bert_tf.checkpoints.architectures.ARCHITECTURES).
    num_classes: the classes (tags) of a classifier's (tagger's) head; 1: regression.
    settings: the head's dropout, and a multiple-choice model's choices.

  Returns:
    BertEncoder, BertPretrainer (with the next-sentence head when "next_sentence" is
    in items), BertClassifier, BertTokenClassifier, BertSpanLabeler or
    BertMultipleChoice.
  """
  if name_map.NEXT_SENTENCE in items and name_map.MASKED_LM not in items:
    raise ConversionError("The checkpoint has a next-sentence head but no masked-LM head; "
                          "bert_tf models hold the next-sentence head only beside it.")
  architecture = architectures.of_items(items)
  settings = settings or architectures.HeadSettings()
  dropout = settings.head_dropout_rate
  encoder = BertEncoder.from_config_object(encoder_config)
  head = architecture.head
  if name_map.MASKED_LM in items:
    return BertPretrainer(encoder, use_next_sentence_label=name_map.NEXT_SENTENCE in items)
  if head == name_map.CLASSIFIER:
    return BertClassifier(encoder, num_classes, dropout_rate=dropout, name="bert_classifier")
  if head == name_map.TAGGER:
    return BertTokenClassifier(encoder, num_classes, dropout_rate=dropout,
                               name="bert_token_classifier")
  if head == name_map.SPAN_LABELER:
    return BertSpanLabeler(encoder, name="bert_span_labeler")
  if head == name_map.CHOICE_SCORER:
    return BertMultipleChoice(encoder, architectures.num_choices(settings),
                              dropout_rate=dropout, name="bert_multiple_choice")
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


def variables_by_path(model) -> Dict[str, object]:
  """{variable.path: variable} of every weight of `model` (a shared variable once)."""
  out = {}
  for variable in model.weights:
    if variable.path in out and out[variable.path] is not variable:
      raise ConversionError(f"Two variables of {model.name} share the path {variable.path}")
    out[variable.path] = variable
  return out


def _model_rows(model, items: Optional[Sequence[str]] = None):
  """The table rows of `model` (or of its `items`), checked to cover exactly its
  variables."""
  model_items = tuple(model.checkpoint_items)
  items = tuple(items) if items is not None else model_items
  unknown = [item for item in items if item not in name_map.ITEMS]
  if unknown:
    raise ConversionError(f"Checkpoint items {unknown} do not convert; convertible items: "
                          f"{', '.join(name_map.ITEMS)}")
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
    model: a BertEncoder, BertPretrainer or task model.
    fmt: bert_tf, google_tf1, huggingface or keras_hub. Hugging Face names carry the
      "bert." prefix when a head is included (BertFor... style), none otherwise
      (BertModel style), and leave out the pooler where the transformers class has none.
      KerasHub arrays keep our shapes (the writer reshapes them into KerasHub's).
    items: the checkpoint items to include; default: all of the model's.

  Returns:
    {name: float32 array}.

  Raises:
    ConversionError: `fmt` has no names for one of the items.
  """
  rows, variables = _model_rows(model, items)
  architecture = architectures.of_items({row.item for row in rows})
  with_prefix = architecture.items != (name_map.ENCODER,)
  if fmt == HUGGINGFACE and not architecture.hf_pooler:
    pooler = architectures.pooler_rows(rows)
    rows = [row for row in rows if row not in pooler]
  try:
    name_map.rows_by_name(rows, fmt)
  except ValueError as e:
    raise ConversionError(f"{model.name}: {e}") from None
  out = {}
  for row in rows:
    array = snapshots.host_value(variables[row.bert_tf])
    if row.transposed_in(fmt):
      array = array.T
    name = (name_map.hf_file_name(row, with_prefix) if fmt == HUGGINGFACE
            else row.name_in(fmt))
    out[name] = np.ascontiguousarray(array)
  return out
