"""The models conversion knows, each under its name in every format, and what a task
checkpoint carries beside its weights (label names, the head's dropout, the tokenizer's
case).

One row per bert_tf model: its checkpoint items (`name_map.ITEMS`), the bert_tf task
that trains and serves it (`task.name` of an experiment), the Hugging Face class
(config.json `architectures`) and whether that class has the pooler (transformers
builds the encoder of token tagging, question answering and masked-LM models without
it), and the KerasHub class, where one exists.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from bert_tf.checkpoints import name_map
from bert_tf.checkpoints.files import ConversionError
from bert_tf.data.task_files import glue
from bert_tf.data.task_files import swag

# bert_tf task names (bert_tf.tasks registers them; conversion sits below the tasks).
PRETRAINING = "pretraining"
SENTENCE_PREDICTION = "sentence_prediction"
TAGGING = "tagging"
SQUAD = "squad"
MULTIPLE_CHOICE = "multiple_choice"

# The sequence length of an experiment's data, unless the position table is shorter.
_SEQ_LENGTH = 128

# transformers' problem_type values of sequence classification.
_REGRESSION = "regression"
_SINGLE_LABEL = "single_label_classification"


@dataclasses.dataclass(frozen=True)
class Architecture:
  """One model under the names of each format.

  Attributes:
    items: its checkpoint items, encoder first.
    task: the bert_tf task name; "" for a bare encoder.
    huggingface: the transformers class.
    hf_pooler: whether the transformers class holds the pooler.
    keras_hub: the KerasHub class, or None.
  """

  items: Tuple[str, ...]
  task: str
  huggingface: str
  hf_pooler: bool = True
  keras_hub: Optional[str] = None

  @property
  def head(self) -> Optional[str]:
    """The fine-tuning head's item (classifier, tagger, ...), or None."""
    heads = [item for item in self.items if item in _HEADS]
    return heads[0] if heads else None


_HEADS = (name_map.CLASSIFIER, name_map.TAGGER, name_map.SPAN_LABELER,
          name_map.CHOICE_SCORER)
E = name_map.ENCODER
ARCHITECTURES: Tuple[Architecture, ...] = (
    Architecture((E,), "", "BertModel", keras_hub="BertBackbone"),
    Architecture((E, name_map.MASKED_LM), PRETRAINING, "BertForMaskedLM", hf_pooler=False),
    Architecture((E, name_map.MASKED_LM, name_map.NEXT_SENTENCE), PRETRAINING,
                 "BertForPreTraining"),
    Architecture((E, name_map.CLASSIFIER), SENTENCE_PREDICTION,
                 "BertForSequenceClassification", keras_hub="BertTextClassifier"),
    Architecture((E, name_map.TAGGER), TAGGING, "BertForTokenClassification",
                 hf_pooler=False),
    Architecture((E, name_map.SPAN_LABELER), SQUAD, "BertForQuestionAnswering",
                 hf_pooler=False),
    Architecture((E, name_map.CHOICE_SCORER), MULTIPLE_CHOICE, "BertForMultipleChoice"),
)


def of_items(items: Iterable[str]) -> Architecture:
  """The architecture whose checkpoint items are `items`.

  Raises:
    ConversionError: no bert_tf model holds exactly those items.
  """
  items = set(items)
  for architecture in ARCHITECTURES:
    if set(architecture.items) == items:
      return architecture
  known = "; ".join("+".join(a.items) for a in ARCHITECTURES)
  raise ConversionError(f"No convertible model holds the checkpoint items "
                        f"{'+'.join(sorted(items))}; convertible: {known}")


def of_class_name(name: str, fmt: str, source: str) -> Architecture:
  """The architecture of a Hugging Face or KerasHub class name (fmt: huggingface or
  keras_hub).

  Raises:
    ConversionError: naming `source` and the classes that convert.
  """
  for architecture in ARCHITECTURES:
    if getattr(architecture, fmt) == name:
      return architecture
  known = ", ".join(getattr(a, fmt) for a in ARCHITECTURES if getattr(a, fmt))
  raise ConversionError(f"{source}: {name} does not convert; the {fmt} classes that do: "
                        f"{known}")


@dataclasses.dataclass(frozen=True)
class HeadSettings:
  """What a task checkpoint carries beside its weights.

  Attributes:
    label_names: class or tag names in id order; () where the head has none
      (regression, spans, choices, pretraining) or they are not known.
    num_choices: multiple choice: choices per example; 0 for the task's default.
    head_dropout_rate: the dropout before the fine-tuning head.
    lower_case: whether the vocab's tokenizer lower-cases; None where not known.
  """

  label_names: Tuple[str, ...] = ()
  num_choices: int = 0
  head_dropout_rate: float = 0.1
  lower_case: Optional[bool] = None


def head_size(model) -> int:
  """The output width of a model's fine-tuning head (classes or tags; 1 for
  regression and multiple choice, 2 for spans), 0 without one."""
  architecture = of_items(model.checkpoint_items)
  if architecture.head is None:
    return 0
  return int(model.checkpoint_items[architecture.head].dense.kernel.shape[-1])


def label_names(architecture: Architecture, settings: HeadSettings,
                num_classes: int) -> Tuple[str, ...]:
  """The label names of a classifier or tagger of `num_classes` outputs: the settings'
  when they fit, else "LABEL_<i>" (transformers' default); () for other models and
  for regression."""
  if architecture.task not in (SENTENCE_PREDICTION, TAGGING) or num_classes < 2:
    return ()
  if len(settings.label_names) == num_classes:
    return tuple(settings.label_names)
  return default_label_names(num_classes)


def default_label_names(num_classes: int) -> Tuple[str, ...]:
  """transformers' default label names: LABEL_0, LABEL_1, ..."""
  return tuple(f"LABEL_{i}" for i in range(num_classes))


# ----- bert_tf experiments (params.yaml) -----


def task_section(architecture: Architecture, model, settings: HeadSettings
                 ) -> Dict[str, Any]:
  """The `task` section of the experiment that trains and serves `model`; {} for a
  bare encoder."""
  if not architecture.task:
    return {}
  section: Dict[str, Any] = {"name": architecture.task}
  num_classes = head_size(model)
  if architecture.task == PRETRAINING:
    section["use_next_sentence_label"] = name_map.NEXT_SENTENCE in architecture.items
  elif architecture.task == SENTENCE_PREDICTION:
    section["num_classes"] = num_classes
  elif architecture.task == MULTIPLE_CHOICE:
    section["num_choices"] = model.num_choices
  names = label_names(architecture, settings, num_classes)
  # transformers' default names are bert_tf's default class names "0", "1", ... (GLUE's
  # and those of labelled files), which the task takes when none are given.
  if names and not (architecture.task == SENTENCE_PREDICTION
                    and names == default_label_names(num_classes)):
    section["label_names"] = list(names)
  return section


def experiment(architecture: Architecture, model, settings: HeadSettings,
               encoder_config: Mapping[str, Any], vocab_file: str) -> Dict[str, Any]:
  """The experiment (params.yaml) of a converted task checkpoint: its task section
  with the labels, the model, the tokenizer, and a sequence length the position table
  holds."""
  tokenizer: Dict[str, Any] = {"vocab_file": vocab_file}
  if settings.lower_case is not None:
    tokenizer["lower_case"] = settings.lower_case
  seq_length = min(_SEQ_LENGTH, encoder_config["max_position_embeddings"])
  return {"task": task_section(architecture, model, settings),
          "model": {"encoder": dict(encoder_config),
                    "head_dropout_rate": settings.head_dropout_rate},
          "tokenizer": tokenizer,
          "train_data": {"seq_length": seq_length},
          # A section given replaces the default one whole: eval_data's own defaults.
          "eval_data": {"seq_length": seq_length, "is_training": False,
                        "drop_remainder": False}}


def settings_from_experiment(data: Mapping[str, Any], architecture: Architecture
                             ) -> HeadSettings:
  """The HeadSettings of an experiment dict (a trainer's or converter's params.yaml);
  its task section counts only where it is the architecture's task. The label names of
  a `glue_task` are GLUE's."""
  task = data.get("task") or {}
  if task.get("name") != architecture.task:
    task = {}
  names = tuple(task.get("label_names") or ())
  if not names and task.get("glue_task") in glue.GLUE_TASKS:
    names = tuple(glue.GLUE_TASKS[task["glue_task"]].label_names)
  model = data.get("model") or {}
  tokenizer = data.get("tokenizer") or {}
  return HeadSettings(label_names=names, num_choices=int(task.get("num_choices") or 0),
                      head_dropout_rate=float(model.get("head_dropout_rate", 0.1)),
                      lower_case=tokenizer.get("lower_case"))


def num_choices(settings: HeadSettings) -> int:
  """The choices per example of a multiple-choice model (the task's default: SWAG's)."""
  return settings.num_choices or swag.NUM_SWAG_CHOICES


# ----- Hugging Face config.json -----


def huggingface_architecture(config: Mapping[str, Any], names: Iterable[str],
                             source: str) -> Architecture:
  """The architecture of a Hugging Face folder: its config's `architectures`, or where
  it names none, the heads its tensor names show.

  Raises:
    ConversionError: an unknown class, several, or a head named alike in several
      classes (classifier.*) without a class to tell which.
  """
  classes = config.get("architectures") or []
  if len(classes) > 1:
    raise ConversionError(f"{source}: config.json names several architectures {classes}; "
                          "keep the one the weights are of.")
  if classes:
    return of_class_name(classes[0], "huggingface", source)
  names = list(names)
  if any(name.startswith("classifier.") for name in names):
    raise ConversionError(
        f"{source}: config.json names no architecture, and classifier.* is the head of "
        "BertForSequenceClassification, BertForTokenClassification and "
        "BertForMultipleChoice alike; set \"architectures\" in config.json.")
  items = name_map.items_present(names, "huggingface")
  return of_items(items or (name_map.ENCODER,))


def settings_from_huggingface(config: Mapping[str, Any], architecture: Architecture,
                              num_classes: int, source: str) -> HeadSettings:
  """The HeadSettings of a transformers config.json (`id2label`, `problem_type`,
  `classifier_dropout`) for a head of `num_classes` outputs.

  Raises:
    ConversionError: a problem bert_tf's task does not train (multi-label
      classification, regression of several scores).
  """
  problem = config.get("problem_type")
  if architecture.task == SENTENCE_PREDICTION:
    if problem == "multi_label_classification":
      raise ConversionError(f"{source}: problem_type multi_label_classification; bert_tf "
                            "trains single-label classification and regression.")
    if problem == _REGRESSION and num_classes != 1:
      raise ConversionError(f"{source}: regression of {num_classes} scores; bert_tf's "
                            "regression predicts one score (num_labels 1).")
  id2label = config.get("id2label") or {}
  try:
    names = tuple(str(id2label[key]) for key in sorted(id2label, key=int))
  except ValueError:
    raise ConversionError(f"{source}: id2label keys must be class ids, got "
                          f"{sorted(id2label)}") from None
  dropout = config.get("classifier_dropout")
  if dropout is None:
    dropout = config.get("hidden_dropout_prob", 0.1)
  return HeadSettings(label_names=names, head_dropout_rate=float(dropout))


def huggingface_fields(architecture: Architecture, model, settings: HeadSettings
                       ) -> Dict[str, Any]:
  """The config.json fields of the head: id2label and label2id (whose length is
  transformers' num_labels), problem_type and classifier_dropout."""
  if architecture.head is None:
    return {}
  num_labels = head_size(model) if architecture.task in (SENTENCE_PREDICTION,
                                                         TAGGING) else 2
  names = label_names(architecture, settings, num_labels) or default_label_names(num_labels)
  fields: Dict[str, Any] = {
      "id2label": {str(i): name for i, name in enumerate(names)},
      "label2id": {name: i for i, name in enumerate(names)},
      "classifier_dropout": settings.head_dropout_rate,
  }
  if architecture.task == SENTENCE_PREDICTION:
    fields["problem_type"] = _REGRESSION if num_labels == 1 else _SINGLE_LABEL
  return fields


def pooler_rows(rows: List[name_map.WeightName]) -> List[name_map.WeightName]:
  """The pooler's rows among `rows`."""
  return [row for row in rows if row.bert_tf.startswith("pooler/")]
