"""SQuAD post-processing: start/end logits of every window -> answer text per question.

As the original release: for each question, the n_best_size best start and end
positions of each window are combined into spans that lie in the context, end after
they start, are at most max_answer_length tokens long and start where the window gives
that token its most context; spans are ranked by start + end logit, de-tokenized and
mapped back onto the original context text (its casing, accents and punctuation). For
v2.0 the null answer scores start_logit[0] + end_logit[0] of its best window; a question
gets "" when that null score minus the best span's score exceeds a threshold.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import functools
import json
import math
import os
import unicodedata
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from bert_tf.data.task_files.squad import SquadExample, SquadFeatures
from bert_tf.utils import files

# Null odds of a question whose n-best list holds no span at all (evaluation's and the
# served model's).
NO_SPAN_NULL_ODDS = 1e9


@dataclasses.dataclass
class SquadPredictions:
  """What post-processing produces, keyed by question id.

  predictions: the answer text ("" for no answer under v2.0).
  nbest: the ranked candidates, each {"text", "probability", "start_logit", "end_logit"}.
  null_odds: v2.0 only: null score minus the best span's score.
  best_non_null: v2.0 only: the best non-empty answer (used to re-threshold).
  """

  predictions: Dict[str, str]
  nbest: Dict[str, List[Dict[str, float]]]
  null_odds: Dict[str, float]
  best_non_null: Dict[str, str]

  def with_threshold(self, threshold: float) -> Dict[str, str]:
    """v2.0 predictions with "" wherever the null odds exceed `threshold`."""
    return {qid: ("" if self.null_odds[qid] > threshold else self.best_non_null[qid])
            for qid in self.null_odds}


# --------------------------------------------------------------------------------------
# The original release's basic tokenization, used only to align text (see get_final_text).


def _is_whitespace(ch: str) -> bool:
  return ch in (" ", "\t", "\n", "\r") or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
  if ch in ("\t", "\n", "\r"):
    return False
  return unicodedata.category(ch) in ("Cc", "Cf")


def _is_punctuation(ch: str) -> bool:
  cp = ord(ch)
  # ASCII symbols such as ^ $ ` count as punctuation, as in the original.
  if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
    return True
  return unicodedata.category(ch).startswith("P")


_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_cjk(ch: str) -> bool:
  cp = ord(ch)
  return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


_KEEP, _DROP, _SPACE, _CJK, _PUNCT = range(5)


@functools.lru_cache(maxsize=None)
def _char_class(ch: str) -> int:
  cp = ord(ch)
  if cp == 0 or cp == 0xFFFD or _is_control(ch):
    return _DROP
  if _is_whitespace(ch):
    return _SPACE
  if _is_cjk(ch):
    return _CJK
  if _is_punctuation(ch):
    return _PUNCT
  return _KEEP


@functools.lru_cache(maxsize=65536)
def _normalize_word(word: str, lower_case: bool) -> str:
  if not lower_case:
    return word
  return "".join(c for c in unicodedata.normalize("NFD", word.lower())
                 if unicodedata.category(c) != "Mn")


def basic_tokenize(text: str, lower_case: bool) -> List[str]:
  """The original BERT basic tokenizer: clean, split CJK, white space and punctuation.

  With lower_case the text is lower-cased and accents are stripped (NFD, then combining
  marks removed). Returns the tokens.
  """
  cleaned = []
  for ch in text:
    kind = _char_class(ch)
    if kind == _DROP:
      continue
    if kind == _SPACE:
      cleaned.append(" ")
    elif kind == _CJK:
      cleaned.append(f" {ch} ")
    else:
      cleaned.append(ch)
  tokens = []
  for word in "".join(cleaned).split():
    current = []
    for ch in _normalize_word(word, lower_case):
      if _char_class(ch) == _PUNCT:
        if current:
          tokens.append("".join(current))
          current = []
        tokens.append(ch)
      else:
        current.append(ch)
    if current:
      tokens.append("".join(current))
  return tokens


def _non_space_positions(text: str) -> List[int]:
  return [i for i, ch in enumerate(text) if ch != " "]


def get_final_text(pred_text: str, orig_text: str, lower_case: bool) -> str:
  """Projects de-tokenized prediction text onto the original words it came from.

  Args:
    pred_text: the predicted WordPieces joined ("steve smith", lower-cased, no "##").
    orig_text: the original whitespace words of the span, joined by spaces
      ("Steve Smith's").

  Returns:
    The matching substring of orig_text ("Steve Smith"), or orig_text itself when the
    two cannot be aligned character by character.
  """
  tok_text = " ".join(basic_tokenize(orig_text, lower_case))
  start = tok_text.find(pred_text)
  if start == -1:
    return orig_text
  end = start + len(pred_text) - 1
  # Characters other than spaces correspond one to one when the counts agree.
  orig_positions = _non_space_positions(orig_text)
  tok_positions = _non_space_positions(tok_text)
  if len(orig_positions) != len(tok_positions):
    return orig_text
  first = bisect.bisect_left(tok_positions, start)
  last = bisect.bisect_left(tok_positions, end)
  if (first == len(tok_positions) or tok_positions[first] != start or
      last == len(tok_positions) or tok_positions[last] != end):
    return orig_text
  return orig_text[orig_positions[first]:orig_positions[last] + 1]


def best_indexes(logits: Sequence[float], n_best_size: int) -> List[int]:
  """Indexes of the n_best_size largest logits, largest first (ties: lower index first)."""
  order = np.argsort(-np.asarray(logits, np.float64), kind="stable")
  return order[:n_best_size].tolist()


def softmax(scores: Sequence[float]) -> List[float]:
  """A numerically stable softmax of a list of floats."""
  if not scores:
    return []
  top = max(scores)
  exps = [math.exp(s - top) for s in scores]
  total = sum(exps)
  return [e / total for e in exps]


def detokenize(tokens: Sequence[str]) -> str:
  """WordPieces joined into text: "##" continuations glued to their word."""
  text = " ".join(tokens).replace(" ##", "").replace("##", "")
  return " ".join(text.strip().split())


_Prelim = collections.namedtuple("_Prelim",
                                 ["feature_index", "start", "end", "start_logit", "end_logit"])


def postprocess(examples: Sequence[SquadExample], features: Sequence[SquadFeatures],
                results: Mapping[int, Tuple[Sequence[float], Sequence[float]]],
                n_best_size: int = 20, max_answer_length: int = 30, lower_case: bool = True,
                version_2_with_negative: bool = False,
                null_score_diff_threshold: float = 0.0) -> SquadPredictions:
  """Turns the logits of every window into answers.

  Args:
    examples: the questions (read_squad_examples with is_training=False).
    features: their windows (convert_examples_to_features).
    results: {unique_id: (start_logits [T], end_logits [T])} for every feature.
    n_best_size: start and end candidates per window, and answers kept per question.
    max_answer_length: longest answer in WordPieces.
    lower_case: whether the vocab is uncased (for mapping back to the original text).
    version_2_with_negative: whether "" (the [CLS] span) is an answer.
    null_score_diff_threshold: v2.0: "" is predicted where null odds exceed it.

  Returns:
    SquadPredictions. Questions without any window result are left out.
  """
  by_example: Dict[int, List[SquadFeatures]] = collections.defaultdict(list)
  for feature in features:
    by_example[feature.example_index].append(feature)

  predictions, nbest_json, null_odds, best_non_null = {}, {}, {}, {}
  for example_index, example in enumerate(examples):
    windows = [f for f in by_example.get(example_index, []) if f.unique_id in results]
    if not windows:
      continue
    prelim: List[_Prelim] = []
    score_null = math.inf
    null_index, null_start, null_end = 0, 0.0, 0.0
    for feature_index, feature in enumerate(windows):
      start_logits, end_logits = (np.asarray(x, np.float64) for x in results[feature.unique_id])
      if version_2_with_negative:
        null_score = start_logits[0] + end_logits[0]
        if null_score < score_null:
          score_null = null_score
          null_index, null_start, null_end = (feature_index, float(start_logits[0]),
                                              float(end_logits[0]))
      for start in best_indexes(start_logits, n_best_size):
        for end in best_indexes(end_logits, n_best_size):
          if start >= len(feature.tokens) or end >= len(feature.tokens):
            continue
          if start not in feature.token_to_orig_map or end not in feature.token_to_orig_map:
            continue
          if not feature.token_is_max_context.get(start, False):
            continue
          if end < start or end - start + 1 > max_answer_length:
            continue
          prelim.append(_Prelim(feature_index, start, end, float(start_logits[start]),
                                float(end_logits[end])))
    if version_2_with_negative:
      prelim.append(_Prelim(null_index, 0, 0, null_start, null_end))
    prelim.sort(key=lambda p: p.start_logit + p.end_logit, reverse=True)

    seen = set()
    nbest: List[Tuple[str, float, float]] = []
    for pred in prelim:
      if len(nbest) >= n_best_size:
        break
      if pred.start > 0:
        feature = windows[pred.feature_index]
        orig_start = feature.token_to_orig_map[pred.start]
        orig_end = feature.token_to_orig_map[pred.end]
        orig_text = " ".join(example.doc_tokens[orig_start:orig_end + 1])
        pred_text = detokenize(feature.tokens[pred.start:pred.end + 1])
        text = get_final_text(pred_text, orig_text, lower_case)
      else:
        text = ""
      if text in seen:
        continue
      seen.add(text)
      nbest.append((text, pred.start_logit, pred.end_logit))
    if version_2_with_negative and "" not in seen:
      nbest.append(("", null_start, null_end))
    if not nbest:
      nbest.append(("empty", 0.0, 0.0))

    probs = softmax([s + e for _, s, e in nbest])
    nbest_json[example.qas_id] = [
        {"text": text, "probability": p, "start_logit": s, "end_logit": e}
        for (text, s, e), p in zip(nbest, probs)]
    non_null = next(((t, s, e) for t, s, e in nbest if t), None)
    if not version_2_with_negative:
      predictions[example.qas_id] = nbest[0][0]
      continue
    if non_null is None:
      odds, best_text = NO_SPAN_NULL_ODDS, ""
    else:
      odds, best_text = score_null - non_null[1] - non_null[2], non_null[0]
    null_odds[example.qas_id] = float(odds)
    best_non_null[example.qas_id] = best_text
    predictions[example.qas_id] = "" if odds > null_score_diff_threshold else best_text
  return SquadPredictions(predictions, nbest_json, null_odds, best_non_null)


def write_json_atomic(obj, path: str) -> None:
  """Writes JSON through a temporary name, renamed into place when complete."""
  with files.atomic_open(path) as f:
    f.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def write_prediction_files(result: SquadPredictions, output_dir: str,
                           predictions: Optional[Mapping[str, str]] = None
                           ) -> Dict[str, str]:
  """Writes predictions.json, nbest_predictions.json and (v2.0) null_odds.json.

  Args:
    result: from postprocess.
    output_dir: created if missing.
    predictions: the answers to write, defaulting to result.predictions (pass
      result.with_threshold(t) to write a tuned threshold's answers).

  Returns:
    {file kind: path} of the files written.
  """
  files.make_dirs(output_dir)
  paths = {"predictions": os.path.join(output_dir, "predictions.json"),
           "nbest_predictions": os.path.join(output_dir, "nbest_predictions.json")}
  write_json_atomic(dict(predictions if predictions is not None else result.predictions),
                    paths["predictions"])
  write_json_atomic(result.nbest, paths["nbest_predictions"])
  if result.null_odds:
    paths["null_odds"] = os.path.join(output_dir, "null_odds.json")
    write_json_atomic(result.null_odds, paths["null_odds"])
  return paths
