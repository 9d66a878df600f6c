"""What a Predictor returns: the model's outputs for a batch of texts, by name, as
NumPy arrays, with the readings a Hugging Face or KerasHub user looks for.

The outputs are those of the model's export (bert_tf.export: `serving_default`'s), one
row per text or text pair; any output is an attribute (`predictions.logits`,
`predictions.start_logits`) or a key (`predictions["logits"]`), and a row index gives
that row's outputs (`predictions[0]`). Strings are `str`. Output names, by kind:

  classifier   logits float32 [B, C], probabilities [B, C], label_ids int32 [B],
               label_names [B], truncated_tokens int32 [B]; a regressor: score [B]
  squad        start_logits, end_logits float32 [B, T] (of the answer's window),
               answer_text [B], answer_start, answer_end int32 [B] (characters),
               score, null_score float32 [B], has_answer bool [B], ...
  tagging      entity_count int32 [B], entity_types, entity_text [B, E],
               entity_start, entity_end int32 [B, E] (characters; -1 pads)
  fill_mask    mask_count int32 [B], top_k_tokens [B, P, K], top_k_ids,
               top_k_logits, top_k_probabilities [B, P, K], ...
  multiple_choice  logits, probabilities float32 [B, C], choice int32 [B],
               chosen_ending [B], truncated_tokens int32 [B]

`labels`, `answers`, `entities` and `tokens` read them as lists, one item per row.
"""

import dataclasses
from typing import Dict, List, Sequence

import numpy as np

LOGITS = "logits"
PROBABILITIES = "probabilities"
LABEL_IDS = "label_ids"
LABEL_NAMES = "label_names"
SCORE = "score"
TRUNCATED_TOKENS = "truncated_tokens"
MASK_COUNT = "mask_count"
MASKS_DROPPED = "masks_dropped"
MASK_POSITIONS = "mask_positions"
TOP_K_IDS = "top_k_ids"
TOP_K_TOKENS = "top_k_tokens"
TOP_K_PROBABILITIES = "top_k_probabilities"
TOP_K_LOGITS = "top_k_logits"
CHOICE = "choice"
CHOSEN_ENDING = "chosen_ending"
START_LOGITS = "start_logits"
END_LOGITS = "end_logits"
START_INDEX = "start_index"
END_INDEX = "end_index"
WINDOW_INDEX = "window_index"
NUM_WINDOWS = "num_windows"
NULL_SCORE = "null_score"
HAS_ANSWER = "has_answer"
ANSWER_TEXT = "answer_text"
ANSWER_START = "answer_start"
ANSWER_END = "answer_end"
ENTITY_COUNT = "entity_count"
ENTITY_TYPES = "entity_types"
ENTITY_START = "entity_start"
ENTITY_END = "entity_end"
ENTITY_TEXT = "entity_text"


def _text(value) -> str:
  return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def to_numpy(outputs) -> Dict[str, np.ndarray]:
  """{name: tensor or array} -> {name: np.ndarray}; strings become `str` objects."""
  result = {}
  for name, value in outputs.items():
    value = np.asarray(value)
    if value.dtype == object or value.dtype.kind in "SU":
      value = np.vectorize(_text, otypes=[object])(value) if value.size else value.astype(
          object)
    result[name] = value
  return result


def _pad_value(array: np.ndarray):
  """What pads an output's inner axes: "" for strings, -1 for integers (the exports'
  padding of character offsets), 0 otherwise."""
  if array.dtype == object:
    return ""
  return -1 if array.dtype.kind in "iu" else 0


def concatenate(batches: Sequence[Dict[str, np.ndarray]]) -> Dict[str, np.ndarray]:
  """The outputs of several batches as one, along the rows; inner axes that differ
  between batches (a tagger's entities) are padded to the longest (`_pad_value`)."""
  if len(batches) == 1:
    return dict(batches[0])
  result = {}
  for name in batches[0]:
    arrays = [batch[name] for batch in batches]
    shape = np.max([a.shape for a in arrays], axis=0)
    padded = []
    for a in arrays:
      widths = [(0, 0)] + [(0, int(n) - s) for n, s in zip(shape[1:], a.shape[1:])]
      padded.append(np.pad(a, widths, constant_values=_pad_value(a)) if any(
          w for _, w in widths) else a)
    result[name] = np.concatenate(padded, axis=0)
  return result


@dataclasses.dataclass
class Predictions:
  """The outputs of a Predictor for B rows.

  Attributes:
    kind: the export kind of the model (classifier, squad, tagging, fill_mask, ...).
    outputs: {output name: np.ndarray [B, ...]}.
  """
  kind: str
  outputs: Dict[str, np.ndarray]

  def __len__(self) -> int:
    return len(next(iter(self.outputs.values()))) if self.outputs else 0

  def __getattr__(self, name):
    outputs = self.__dict__.get("outputs", {})
    if name in outputs:
      return outputs[name]
    raise AttributeError(f"A {self.__dict__.get('kind')} model has no output '{name}'; its "
                         f"outputs: {', '.join(sorted(outputs))}")

  def __getitem__(self, key):
    """An output by name, or row `key`'s outputs as {name: value}."""
    if isinstance(key, str):
      return getattr(self, key)
    return {name: value[key] for name, value in self.outputs.items()}

  @property
  def labels(self) -> List[str]:
    """The predicted label of each row (a classifier's label names)."""
    return list(getattr(self, LABEL_NAMES))

  @property
  def answers(self) -> List[dict]:
    """SQuAD: per row {"answer", "start", "end" (characters in the context, end
    exclusive), "score", "has_answer"}; "" and -1 where there is none."""
    return [{"answer": text, "start": int(start), "end": int(end), "score": float(score),
             "has_answer": bool(has)}
            for text, start, end, score, has in zip(
                self.answer_text, self.answer_start, self.answer_end, self.score,
                self.has_answer)]

  @property
  def entities(self) -> List[List[dict]]:
    """A tagger's entities, per row [{"type", "text", "start", "end"}] (characters)."""
    return [[{"type": self.entity_types[row, e], "text": self.entity_text[row, e],
              "start": int(self.entity_start[row, e]), "end": int(self.entity_end[row, e])}
             for e in range(int(count))]
            for row, count in enumerate(self.entity_count)]

  @property
  def tokens(self) -> List[List[List[str]]]:
    """Fill-mask: per row, for each [MASK] predicted, its top-k tokens, best first."""
    return [[list(self.top_k_tokens[row, m]) for m in range(int(count))]
            for row, count in enumerate(getattr(self, MASK_COUNT))]
