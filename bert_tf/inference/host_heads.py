"""A model's answer to raw text without TensorFlow: texts tokenized and packed by
`bert_tf.text.host_tokenizer`, the Keras model run on its backend (JAX, torch), and its
outputs read in NumPy into the outputs the model's export gives
(bert_tf.export's classifier and fill_mask serving modules), so that a Predictor reads
the same names on every route.

Served here: the classifier (sentence_prediction) and fill_mask (pretraining) kinds.
"""

from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from bert_tf import constants
from bert_tf.inference import predictions as names
from bert_tf.utils import errors

# Text inputs of the kinds served here, as the exports name them.
TEXT, TEXT_B = "text", "text_b"


def softmax(logits: np.ndarray) -> np.ndarray:
  """float32 softmax over the last axis."""
  shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
  return (shifted / shifted.sum(axis=-1, keepdims=True)).astype(np.float32)


def _run(model, inputs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
  """The model's outputs in inference mode (compiled on its backend), as float32 NumPy."""
  outputs = model.predict_on_batch(inputs)
  return {name: np.asarray(value, np.float32) for name, value in outputs.items()}


class ClassifierHead:
  """Logits, probabilities, label ids and names (or a regressor's score) of texts or
  text pairs, as ClassifierServing gives them."""

  def __init__(self, model, tokenizer, seq_length: int, label_names: Sequence[str] = (),
               pair: bool = False):
    self.model, self.tokenizer, self.seq_length = model, tokenizer, seq_length
    self.inputs = (TEXT, TEXT_B) if pair else (TEXT,)
    self.regression = model.num_classes == 1
    self.label_names = np.asarray(
        tuple(label_names) or tuple(str(i) for i in range(model.num_classes)), object)

  def __call__(self, texts: Dict[str, List[str]]) -> Dict[str, np.ndarray]:
    inputs, truncated = self.tokenizer.encode(texts[TEXT], texts.get(TEXT_B),
                                              self.seq_length)
    logits = _run(self.model, inputs)[names.LOGITS]
    if self.regression:
      return {names.SCORE: logits[:, 0], names.TRUNCATED_TOKENS: truncated}
    ids = logits.argmax(axis=-1).astype(np.int32)
    return {names.LOGITS: logits, names.PROBABILITIES: softmax(logits), names.LABEL_IDS: ids,
            names.LABEL_NAMES: self.label_names[ids], names.TRUNCATED_TOKENS: truncated}


class FillMaskHead:
  """The top-k tokens of each [MASK] of texts, as FillMaskServing gives them."""

  inputs = (TEXT,)

  def __init__(self, model, tokenizer, seq_length: int, max_masks: int = 20,
               top_k: int = 5):
    if top_k < 1 or max_masks < 1:
      raise errors.InputError(f"top_k and max_masks must be positive, got {top_k}, "
                              f"{max_masks}")
    self.model, self.tokenizer, self.seq_length = model, tokenizer, seq_length
    self.max_masks, self.top_k = int(max_masks), int(top_k)
    self.tokens = np.asarray(tokenizer.tokens, object)

  def __call__(self, texts: Dict[str, List[str]]) -> Dict[str, np.ndarray]:
    inputs, _ = self.tokenizer.encode(texts[TEXT], seq_length=self.seq_length)
    is_mask = ((inputs[constants.INPUT_WORD_IDS] == self.tokenizer.mask_id)
               & (inputs[constants.INPUT_MASK] != 0))
    rows = len(is_mask)
    positions = np.zeros([rows, self.max_masks], np.int32)
    count = np.zeros([rows], np.int32)
    for row in range(rows):
      found = np.flatnonzero(is_mask[row])[:self.max_masks]
      positions[row, :len(found)], count[row] = found, len(found)
    logits = _run(self.model, {**inputs, constants.MASKED_LM_POSITIONS: positions})[
        constants.MLM_LOGITS]
    # Most probable first; among equal ones the lower id, as tf.math.top_k orders them.
    top_ids = np.argsort(-logits, axis=-1, kind="stable")[..., :self.top_k].astype(np.int32)
    valid = (np.arange(self.max_masks)[None, :] < count[:, None])[..., None]
    top_ids = np.where(valid, top_ids, 0)
    top_logits = np.take_along_axis(logits, top_ids, axis=-1)
    marks = np.asarray([text.count(constants.MASK_TOKEN) for text in texts[TEXT]], np.int32)
    return {
        names.MASK_COUNT: count,
        names.MASKS_DROPPED: marks - count,
        names.MASK_POSITIONS: positions,
        names.TOP_K_IDS: top_ids,
        names.TOP_K_TOKENS: np.where(valid, self.tokens[top_ids], ""),
        names.TOP_K_PROBABILITIES: np.where(
            valid, np.take_along_axis(softmax(logits), top_ids, axis=-1), 0.0).astype(
                np.float32),
        names.TOP_K_LOGITS: np.where(valid, top_logits, 0.0).astype(np.float32),
    }


# The heads by export kind.
HEADS: Dict[str, Callable] = {"classifier": ClassifierHead, "fill_mask": FillMaskHead}


def check_served(kind: str, backend: str) -> None:
  """Raises InputError for a kind not served here (naming the ones that are)."""
  if kind not in HEADS:
    raise errors.InputError(
        f"A {kind} model answers raw text on the TensorFlow backend or from its export; "
        f"on the {backend} backend the predictor serves {', '.join(sorted(HEADS))}")


def head_for(kind: str, model, tokenizer, seq_length: int, options: Optional[dict] = None):
  """The head of `kind` (check_served) over the model, given the task's serving options."""
  return HEADS[kind](model, tokenizer, seq_length, **(options or {}))
