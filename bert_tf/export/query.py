"""Asks an exported SavedModel a question: raw texts in, its answer per row out.

Every kind of export answers (bert_tf.export.kinds): the kind is read from the
outputs of its `serving_default` signature (each kind's `answer_outputs`), its text
inputs from that signature's inputs, and the kind's serving module reads and prints
its answers (`answer`, `describe_answer`). A TF Hub-style pair (bert_tf.export.hub:
DIR/preprocessor and DIR/encoder) is asked through its preprocessor. An export base holding integer version
directories is asked at its newest version, as TF Serving would.

`ask` returns one dict per row: {"kind", the row's texts by input name, the answer's
fields}; `describe` turns one into readable lines.
"""

import dataclasses
import os
import re
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from bert_tf.export import hub
from bert_tf.export import kinds
from bert_tf.export import serving_module as sm
from bert_tf.utils import errors

HUB = "hub"
# Kinds of this module's own that answer as a serving kind does.
_ANSWERS_AS = {HUB: "encoder"}
# The order texts are given in: a question before its context, a context before its
# endings (ending0, ending1, ...).
_INPUT_ORDER = (sm.QUESTION, sm.CONTEXT, sm.TEXT, sm.TEXT_B)


@dataclasses.dataclass(frozen=True)
class Export:
  """A loaded export: its kind, its text inputs in order, and the call.

  `call` takes {input name: tf.string [B]} and returns {output name: tf.Tensor [B, ...]}.
  """
  kind: str
  inputs: Tuple[str, ...]
  call: Callable[[Dict[str, tf.Tensor]], Dict[str, tf.Tensor]]


def kind_of(output_names) -> str:
  """The kind of export whose serving_default has these outputs
  (bert_tf.export.kinds.kind_of_outputs; InputError if none)."""
  kind = kinds.kind_of_outputs(output_names)
  if kind:
    return kind
  raise errors.InputError(f"Not a bert_tf export: serving_default's outputs "
                          f"{sorted(output_names)} name no kind")


def _input_rank(name: str):
  if name in _INPUT_ORDER:
    return (_INPUT_ORDER.index(name), 0)
  ending = re.fullmatch(r"ending(\d+)", name)
  return (len(_INPUT_ORDER), int(ending.group(1)) if ending else 0, name)


def from_signature(signature) -> Export:
  """An Export of a serving_default signature (loaded, or a ServingModule's own)."""
  inputs = tuple(sorted(signature.structured_input_signature[1], key=_input_rank))
  kind = kind_of(set(signature.structured_outputs))
  return Export(kind, inputs, lambda texts: signature(**texts))


def _version_directory(export_dir: str) -> str:
  """export_dir itself, or the newest integer version directory under it."""
  if tf.io.gfile.exists(os.path.join(export_dir, "saved_model.pb")):
    return export_dir
  versions = [int(name.rstrip("/")) for name in tf.io.gfile.listdir(export_dir)
              if name.rstrip("/").isdigit()]
  newest = os.path.join(export_dir, str(max(versions))) if versions else None
  if newest and tf.io.gfile.exists(os.path.join(newest, "saved_model.pb")):
    return newest
  raise errors.InputError(f"{export_dir} is not a SavedModel (no saved_model.pb in it or "
                          "in an integer version directory under it)")


def _load_hub_pair(export_dir: str) -> Export:
  preprocessor = tf.saved_model.load(os.path.join(export_dir, hub.PREPROCESSOR))
  encoder = tf.saved_model.load(os.path.join(export_dir, hub.ENCODER))
  return Export(HUB, (sm.TEXT,), lambda texts: encoder(preprocessor(texts[sm.TEXT])))


def load(export_dir: str) -> Export:
  """Loads an export directory (a version, an export base, or a TF Hub-style pair).

  Raises:
    MissingInputError: no such directory. InputError: not a SavedModel, or one without
      a bert_tf serving_default signature.
  """
  if not tf.io.gfile.isdir(export_dir):
    raise errors.MissingInputError(f"No export directory {export_dir}")
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import  # registers the text ops
  if all(tf.io.gfile.isdir(os.path.join(export_dir, part))
         for part in (hub.PREPROCESSOR, hub.ENCODER)):
    return _load_hub_pair(export_dir)
  loaded = tf.saved_model.load(_version_directory(export_dir))
  if sm.SERVING_DEFAULT not in loaded.signatures:
    raise errors.InputError(f"{export_dir} has no {sm.SERVING_DEFAULT} signature")
  return from_signature(loaded.signatures[sm.SERVING_DEFAULT])


def rows(export: Export, texts: Sequence[str]) -> List[Dict[str, str]]:
  """Groups texts into rows of the export's inputs, in order ({input name: text} each).

  Raises:
    InputError: no texts, or a count that is not a multiple of the inputs per row.
  """
  width = len(export.inputs)
  if not texts or len(texts) % width:
    raise errors.InputError(
        f"A {export.kind} export takes {width} text(s) per question "
        f"({', '.join(export.inputs)}); got {len(texts)}")
  return [dict(zip(export.inputs, texts[i:i + width])) for i in range(0, len(texts), width)]


def answering_class(kind: str) -> type:
  """The ServingModule subclass whose `answer` and `describe_answer` read an export of
  `kind` (a TF Hub-style pair answers as the encoder export does)."""
  return sm.serving_class(_ANSWERS_AS.get(kind, kind))


def ask(export: Export, texts: Sequence[str]) -> List[dict]:
  """Asks the export; returns per row {"kind", its texts by input name, its answer}.

  Args:
    export: from `load` (or `from_signature`).
    texts: the rows' texts in order, len(export.inputs) per row (see `rows`).

  Returns:
    Per row, beside "kind" and the texts: fill_mask "masks" ([[token, probability],
    ...] per [MASK], most probable first); classifier "label", "label_id",
    "probabilities", or "score" (regression); squad "has_answer", "answer", "start",
    "end" (character offsets in the context), "score", "null_score"; tagging
    "entities" ([{type, text, start, end}]); multiple_choice "choice", "ending",
    "probabilities"; encoder and hub "pooled_output" [H], "sequence_output" [T, H].
  """
  batch = rows(export, texts)
  outputs = export.call({name: tf.constant([row[name] for row in batch], tf.string)
                         for name in export.inputs})
  out = {name: np.asarray(value) for name, value in outputs.items()}
  answer = answering_class(export.kind).answer
  return [{"kind": export.kind, **row, **answer(out, i)} for i, row in enumerate(batch)]


def describe(answer: dict) -> List[str]:
  """Readable lines of one row of `ask`: its texts, then its answer, indented."""
  kind = answer["kind"]
  texts = [f"{k}: {v}" for k, v in answer.items()
           if k in _INPUT_ORDER or re.fullmatch(r"ending\d+", k)]
  return [" | ".join(texts)] + answering_class(kind).describe_answer(answer)
