"""A model's answer to raw text without TensorFlow: texts tokenized and packed by
`bert_tf.text.host_tokenizer`, the Keras model run on its backend (JAX, torch), and its
outputs read in NumPy into the outputs the model's export gives
(bert_tf.export's classifier and fill_mask serving modules), so that a Predictor reads
the same names on every route.

Served here: the classifier (sentence_prediction), fill_mask (pretraining) and
multiple_choice kinds; squad (`host_squad`) and tagging (`host_tagging`) in their own
modules.
"""

from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from bert_tf import constants
from bert_tf.inference import host_compute
from bert_tf.inference import host_squad
from bert_tf.inference import host_tagging
from bert_tf.inference import predictions as names
from bert_tf.utils import errors

TEXT, TEXT_B, CONTEXT = host_compute.TEXT, host_compute.TEXT_B, host_compute.CONTEXT


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
    logits = host_compute.run_model(self.model, inputs)[names.LOGITS]
    if self.regression:
      return {names.SCORE: logits[:, 0], names.TRUNCATED_TOKENS: truncated}
    ids = logits.argmax(axis=-1).astype(np.int32)
    return {names.LOGITS: logits, names.PROBABILITIES: host_compute.softmax(logits),
            names.LABEL_IDS: ids, names.LABEL_NAMES: self.label_names[ids],
            names.TRUNCATED_TOKENS: truncated}


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
    logits = host_compute.run_model(
        self.model, {**inputs, constants.MASKED_LM_POSITIONS: positions})[constants.MLM_LOGITS]
    top_ids = host_compute.top_k_indices(logits, self.top_k)
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
            valid, np.take_along_axis(host_compute.softmax(logits), top_ids, axis=-1),
            0.0).astype(np.float32),
        names.TOP_K_LOGITS: np.where(valid, top_logits, 0.0).astype(np.float32),
    }


class MultipleChoiceHead:
  """The choice among C endings of a context, as MultipleChoiceServing gives it: each
  (context, ending) pair packed as `[CLS] context [SEP] ending [SEP]`, the C pairs of a
  row scored together."""

  def __init__(self, model, tokenizer, seq_length: int, num_choices: int = 4):
    if num_choices != model.num_choices:
      raise errors.InputError(f"num_choices {num_choices} != the model's "
                              f"{model.num_choices}")
    self.model, self.tokenizer, self.seq_length = model, tokenizer, seq_length
    self.num_choices = int(num_choices)
    self.inputs = (CONTEXT,) + tuple(f"ending{i}" for i in range(self.num_choices))

  def __call__(self, texts: Dict[str, List[str]]) -> Dict[str, np.ndarray]:
    rows, c = len(texts[CONTEXT]), self.num_choices
    endings = np.asarray([[texts[name][row] for name in self.inputs[1:]]
                          for row in range(rows)], object).reshape([rows, c])
    inputs, truncated = self.tokenizer.encode(
        [context for context in texts[CONTEXT] for _ in range(c)],
        list(endings.ravel()), self.seq_length)
    inputs = {name: value.reshape([rows, c, self.seq_length])
              for name, value in inputs.items()}
    logits = host_compute.run_model(self.model, inputs)[names.LOGITS]
    choice = logits.argmax(axis=-1).astype(np.int32)
    return {names.LOGITS: logits, names.PROBABILITIES: host_compute.softmax(logits),
            names.CHOICE: choice,
            names.CHOSEN_ENDING: endings[np.arange(rows), choice],
            names.TRUNCATED_TOKENS: truncated.reshape([rows, c]).sum(axis=1).astype(np.int32)}


# The heads by export kind.
HEADS: Dict[str, Callable] = {"classifier": ClassifierHead, "fill_mask": FillMaskHead,
                              "multiple_choice": MultipleChoiceHead,
                              "squad": host_squad.SquadHead,
                              "tagging": host_tagging.TaggingHead}


def check_served(kind: str, backend: str) -> None:
  """Raises InputError for a kind not served here (naming the ones that are)."""
  if kind not in HEADS:
    raise errors.InputError(
        f"{kind} models answer raw text on the TensorFlow backend or from their export; "
        f"on the {backend} backend the predictor serves {', '.join(sorted(HEADS))}")


def head_for(kind: str, model, tokenizer, seq_length: int, options: Optional[dict] = None):
  """The head of `kind` (check_served) over the model, given the task's serving options."""
  return HEADS[kind](model, tokenizer, seq_length, **(options or {}))
