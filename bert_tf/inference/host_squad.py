"""SQuAD answers to (question, context) pairs without TensorFlow, as the export's
serving_default gives them (bert_tf.export.squad_serving, whose docstring states the
rule): the question cut to max_query_length pieces, the context's pieces cut into
windows (bert_tf.text.windows), each packed as `[CLS] question [SEP] window [SEP]`, all
windows of the batch run as one batch, the best span over the windows by start + end
logit (summed in float64) among the n_best_size best starts and ends of each window,
and for SQuAD 2.0 the null score's verdict. Character offsets come from Hugging Face
tokenizers' offsets of each piece (bert_tf.text.host_tokenizer).
"""

from typing import Dict, List

import numpy as np

from bert_tf.data.task_files.squad_postprocess import NO_SPAN_NULL_ODDS
from bert_tf.inference import host_compute
from bert_tf.inference import predictions as names
from bert_tf.text import host_tokenizer
from bert_tf.text import windows


def best_span(start_logits: np.ndarray, end_logits: np.ndarray, can_start: np.ndarray,
              can_end: np.ndarray, n_best_size: int, max_answer_length: int):
  """The best span of one window.

  Args:
    start_logits, end_logits: float32 [T].
    can_start, can_end: bool [T], where an answer may start (a context token whose
      piece has its most context here) and end (a context token).
    n_best_size, max_answer_length: as SquadServing's.

  Returns:
    (score float64, start, end): -inf and (0, 0) when no candidate span exists; among
    equal scores the first candidate in (start rank, end rank) order.
  """
  k = min(n_best_size, len(start_logits))
  starts = host_compute.top_k_indices(start_logits, k)
  ends = host_compute.top_k_indices(end_logits, k)
  length = ends[None, :] - starts[:, None]
  valid = (can_start[starts][:, None] & can_end[ends][None, :] & (length >= 0)
           & (length < max_answer_length))
  if not valid.any():
    return -np.inf, 0, 0
  scores = (start_logits[starts].astype(np.float64)[:, None]
            + end_logits[ends].astype(np.float64)[None, :])
  pair = int(np.argmax(np.where(valid, scores, -np.inf)))
  return float(scores.flat[pair]), int(starts[pair // k]), int(ends[pair % k])


class SquadHead:
  """Answers, their character spans and scores, and the answer window's logits."""

  inputs = (host_compute.QUESTION, host_compute.CONTEXT)

  def __init__(self, model, tokenizer, seq_length: int, max_query_length: int = 64,
               max_answer_length: int = 30, version_2_with_negative: bool = False,
               null_score_diff_threshold: float = 0.0, doc_stride: int = 128,
               n_best_size: int = 20):
    self.model, self.tokenizer, self.seq_length = model, tokenizer, seq_length
    self.max_query_length, self.max_answer_length = max_query_length, max_answer_length
    self.version_2_with_negative = bool(version_2_with_negative)
    self.null_score_diff_threshold = float(null_score_diff_threshold)
    self.doc_stride, self.n_best_size = doc_stride, n_best_size

  def _windows(self, texts: Dict[str, List[str]]) -> List[dict]:
    """Each example's question pieces, context pieces with character spans, and
    windows [(first piece, pieces)] (one empty window for an empty context)."""
    questions = self.tokenizer.pieces(texts[host_compute.QUESTION])
    contexts = self.tokenizer.pieces_with_offsets(texts[host_compute.CONTEXT])
    examples = []
    for question, (ids, begin, end) in zip(questions, contexts):
      question = list(question)[:self.max_query_length]
      max_tokens = max(self.seq_length - 3 - len(question), 1)
      spans = windows.doc_windows(len(ids), max_tokens, self.doc_stride) or [(0, 0)]
      examples.append({"question": question, "ids": list(ids), "begin": begin, "end": end,
                       "spans": spans, "first_context": len(question) + 2})
    return examples

  def __call__(self, texts: Dict[str, List[str]]) -> Dict[str, np.ndarray]:
    examples = self._windows(texts)
    window_of = [(e, w) for e in examples for w in range(len(e["spans"]))]
    packed, _ = host_tokenizer.pack(
        [[e["question"] for e, _ in window_of],
         [e["ids"][s:s + n] for e, w in window_of for s, n in [e["spans"][w]]]],
        self.seq_length, self.tokenizer.special_ids)
    outputs = host_compute.run_model(self.model, packed)
    start_logits = outputs[names.START_LOGITS]
    end_logits = outputs[names.END_LOGITS]
    position = np.arange(self.seq_length)
    found, row = [], 0
    for example in examples:
      spans, first = example["spans"], example["first_context"]
      per_window = []
      for w, (piece_start, length) in enumerate(spans):
        in_context = (position >= first) & (position < first + length)
        max_context = np.asarray([
            in_context[p] and windows.max_context_span(spans, p - first + piece_start) == w
            for p in position])
        per_window.append(best_span(start_logits[row + w], end_logits[row + w],
                                    in_context & max_context, in_context,
                                    self.n_best_size, self.max_answer_length))
      scores = [score for score, _, _ in per_window]
      best = max(scores)
      has_span = best > -np.inf
      window = scores.index(best) if has_span else 0
      null = [np.float64(start_logits[row + w, 0]) + np.float64(end_logits[row + w, 0])
              for w in range(len(spans))]
      null_score = min(null)
      has_answer = has_span
      if self.version_2_with_negative:
        odds = null_score - best if has_span else NO_SPAN_NULL_ODDS
        has_answer = has_span and not odds > self.null_score_diff_threshold
      found.append({"row": row + window, "window": window, "spans": len(spans),
                    "score": best if has_span else 0.0, "null_score": null_score,
                    "has_answer": has_answer, "span": per_window[window][1:],
                    "first_piece": spans[window][0] - first, "example": example})
      row += len(spans)
    return self._outputs(found, texts[host_compute.CONTEXT], start_logits, end_logits)

  @staticmethod
  def _outputs(found, contexts, start_logits, end_logits) -> Dict[str, np.ndarray]:
    """The export's outputs of the examples' best spans."""
    result = {names.START_INDEX: [], names.END_INDEX: [], names.WINDOW_INDEX: [],
              names.ANSWER_TEXT: [], names.ANSWER_START: [], names.ANSWER_END: []}
    for f, context in zip(found, contexts):
      start, end = f["span"] if f["has_answer"] else (0, 0)
      result[names.START_INDEX].append(start)
      result[names.END_INDEX].append(end)
      result[names.WINDOW_INDEX].append(f["window"] if f["has_answer"] else 0)
      if f["has_answer"]:
        begin = f["example"]["begin"][f["first_piece"] + start]
        finish = f["example"]["end"][f["first_piece"] + end]
        result[names.ANSWER_TEXT].append(context[begin:finish])
      else:
        begin = finish = -1
        result[names.ANSWER_TEXT].append("")
      result[names.ANSWER_START].append(begin)
      result[names.ANSWER_END].append(finish)
    rows = [f["row"] for f in found]
    return {
        **{name: np.asarray(values, np.int32) for name, values in result.items()
           if name != names.ANSWER_TEXT},
        names.ANSWER_TEXT: np.asarray(result[names.ANSWER_TEXT], object),
        names.NUM_WINDOWS: np.asarray([f["spans"] for f in found], np.int32),
        names.SCORE: np.asarray([f["score"] for f in found], np.float32),
        names.NULL_SCORE: np.asarray([f["null_score"] for f in found], np.float32),
        names.HAS_ANSWER: np.asarray([f["has_answer"] for f in found], bool),
        names.START_LOGITS: start_logits[rows],
        names.END_LOGITS: end_logits[rows],
    }
