"""SQuAD v1.1 and v2.0 exact match and F1, as the official evaluation scripts define them.

Both the prediction and every gold answer are normalized (lower case, every
`string.punctuation` character removed, the articles a/an/the removed, white space
collapsed). Exact match compares the normalized strings; F1 is the token-overlap F1 of
the normalized whitespace tokens. A question scores the maximum over its gold answers;
the reported numbers are 100 times the mean over all questions, a missing prediction
scoring 0. For v2.0, a question without gold answers has the single gold answer "", so
it scores 1 only when the prediction is empty.
"""

import collections
import re
import string
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
  """Lower-cases, drops punctuation and the articles a/an/the, collapses white space."""
  text = text.lower()
  text = "".join(ch for ch in text if ch not in _PUNCTUATION)
  text = _ARTICLES.sub(" ", text)
  return " ".join(text.split())


def answer_tokens(text: str) -> List[str]:
  """The normalized whitespace tokens of `text` (empty for an empty answer)."""
  return normalize_answer(text).split() if text else []


def exact_match_score(prediction: str, gold: str) -> float:
  """1.0 when the normalized strings are equal, else 0.0."""
  return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str) -> float:
  """Token-bag F1 of the normalized strings, in [0, 1].

  As the v2.0 script: when either side has no tokens, F1 is 1.0 if both are empty and
  0.0 otherwise. (The v1.1 script has no empty gold answers, so the two agree there.)
  """
  pred_tokens = answer_tokens(prediction)
  gold_tokens = answer_tokens(gold)
  if not pred_tokens or not gold_tokens:
    return float(pred_tokens == gold_tokens)
  common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
  num_same = sum(common.values())
  if num_same == 0:
    return 0.0
  precision = num_same / len(pred_tokens)
  recall = num_same / len(gold_tokens)
  return 2 * precision * recall / (precision + recall)


def max_over_gold(metric, prediction: str, golds: Sequence[str]) -> float:
  """The best `metric(prediction, gold)` over the gold answers."""
  return max(metric(prediction, gold) for gold in golds)


def gold_answers(dataset: Sequence[Mapping], version_2: bool) -> Dict[str, List[str]]:
  """{question id: gold answer texts} from the `data` list of a SQuAD JSON file.

  For v2.0, questions without answers (or whose answers normalize to nothing) get [""].
  """
  golds = {}
  for article in dataset:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        texts = [a["text"] for a in qa.get("answers", [])]
        if version_2:
          texts = [t for t in texts if normalize_answer(t)] or [""]
        golds[qa["id"]] = texts
  return golds


def raw_scores(golds: Mapping[str, Sequence[str]], predictions: Mapping[str, str]
               ) -> Tuple[Dict[str, float], Dict[str, float]]:
  """Per-question exact match and F1 in [0, 1]; a missing prediction scores 0."""
  exact, f1 = {}, {}
  for qid, answers in golds.items():
    if qid not in predictions:
      exact[qid] = f1[qid] = 0.0
      continue
    exact[qid] = max_over_gold(exact_match_score, predictions[qid], answers)
    f1[qid] = max_over_gold(f1_score, predictions[qid], answers)
  return exact, f1


def _mean_percent(scores: Mapping[str, float], qids: Sequence[str]) -> float:
  return 100.0 * sum(scores[q] for q in qids) / len(qids) if qids else 0.0


def evaluate_v1(dataset: Sequence[Mapping], predictions: Mapping[str, str]
                ) -> Dict[str, float]:
  """The official v1.1 numbers: {"exact_match", "f1"} in percent."""
  golds = gold_answers(dataset, version_2=False)
  exact, f1 = raw_scores(golds, predictions)
  qids = list(golds)
  return {"exact_match": _mean_percent(exact, qids), "f1": _mean_percent(f1, qids)}


def apply_null_threshold(scores: Mapping[str, float], null_odds: Mapping[str, float],
                         has_answer: Mapping[str, bool], threshold: float
                         ) -> Dict[str, float]:
  """Scores after predicting "" wherever null_odds > threshold."""
  out = {}
  for qid, score in scores.items():
    if null_odds.get(qid, 0.0) > threshold:
      out[qid] = float(not has_answer[qid])
    else:
      out[qid] = score
  return out


def best_threshold(predictions: Mapping[str, str], scores: Mapping[str, float],
                   null_odds: Mapping[str, float], has_answer: Mapping[str, bool]
                   ) -> Tuple[float, float]:
  """The null-odds threshold maximizing the mean score, as the v2.0 script finds it.

  Questions are visited in increasing null odds; predicting "" for every question whose
  odds exceed the threshold. Returns (best score in percent, best threshold).
  """
  num_no_answer = sum(1 for q in scores if not has_answer[q])
  current = best = float(num_no_answer)
  best_thresh = 0.0
  for qid in sorted(scores, key=lambda q: null_odds.get(q, 0.0)):
    if qid not in null_odds:
      continue
    if has_answer[qid]:
      diff = scores[qid]
    else:
      diff = -1.0 if predictions.get(qid) else 0.0
    current += diff
    if current > best:
      best = current
      best_thresh = null_odds[qid]
  return 100.0 * best / len(scores) if scores else 0.0, best_thresh


def evaluate_v2(dataset: Sequence[Mapping], predictions: Mapping[str, str],
                null_odds: Optional[Mapping[str, float]] = None,
                null_threshold: float = 1.0) -> Dict[str, float]:
  """The official v2.0 numbers, in percent.

  Args:
    dataset: the `data` list of a SQuAD v2.0 JSON file.
    predictions: {question id: answer text, "" for no answer}.
    null_odds: optional {question id: score of "no answer" minus the best span's}.
    null_threshold: with null_odds, "" is predicted where the odds exceed it.

  Returns:
    exact_match, f1, HasAns_exact / HasAns_f1 / HasAns_total, NoAns_* likewise, and with
    null_odds also best_exact, best_exact_thresh, best_f1, best_f1_thresh.
  """
  golds = gold_answers(dataset, version_2=True)
  has_answer = {q: bool(a[0]) for q, a in golds.items()}
  exact, f1 = raw_scores(golds, predictions)
  if null_odds is not None:
    exact_t = apply_null_threshold(exact, null_odds, has_answer, null_threshold)
    f1_t = apply_null_threshold(f1, null_odds, has_answer, null_threshold)
  else:
    exact_t, f1_t = exact, f1
  qids = list(golds)
  has = [q for q in qids if has_answer[q]]
  no = [q for q in qids if not has_answer[q]]
  out = {"exact_match": _mean_percent(exact_t, qids), "f1": _mean_percent(f1_t, qids),
         "total": float(len(qids))}
  if has:
    out.update(HasAns_exact=_mean_percent(exact_t, has), HasAns_f1=_mean_percent(f1_t, has),
               HasAns_total=float(len(has)))
  if no:
    out.update(NoAns_exact=_mean_percent(exact_t, no), NoAns_f1=_mean_percent(f1_t, no),
               NoAns_total=float(len(no)))
  if null_odds is not None:
    best_exact, exact_thresh = best_threshold(predictions, exact, null_odds, has_answer)
    best_f1, f1_thresh = best_threshold(predictions, f1, null_odds, has_answer)
    out.update(best_exact=best_exact, best_exact_thresh=exact_thresh, best_f1=best_f1,
               best_f1_thresh=f1_thresh)
  return out
