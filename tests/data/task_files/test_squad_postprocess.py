"""SQuAD post-processing golden cases: ranking, span limits, text mapping, null answers."""

import json
import os

import numpy as np
import pytest

from bert_tf.data.task_files import squad_postprocess as pp
from bert_tf.data.task_files.squad import SquadExample, SquadFeatures

# The original words of the context and their WordPieces (uncased).
DOC = ["Steve", "Smith's", "house", "(in", "Paris).", "Café", "Crème"]
PIECES = [["steve"], ["smith", "'", "s"], ["house"], ["(", "in"], ["paris", ")", "."],
          ["cafe"], ["cr", "##eme"]]
QUERY = ["who", "?"]


def make_feature(unique_id=1, doc_span_index=0, max_context=None):
  tokens = ["[CLS]", *QUERY, "[SEP]"]
  to_orig, is_max = {}, {}
  for word_index, pieces in enumerate(PIECES):
    for piece in pieces:
      to_orig[len(tokens)] = word_index
      is_max[len(tokens)] = True if max_context is None else max_context(len(tokens))
      tokens.append(piece)
  tokens.append("[SEP]")
  n = len(tokens)
  return SquadFeatures(unique_id=unique_id, example_index=0, doc_span_index=doc_span_index,
                       tokens=tokens, token_to_orig_map=to_orig, token_is_max_context=is_max,
                       input_ids=[0] * n, input_mask=[1] * n, segment_ids=[0] * n)


EXAMPLE = SquadExample(qas_id="q", question_text="who?", doc_tokens=DOC)
FEATURE = make_feature()
T = len(FEATURE.tokens) + 3  # Logits cover padding too.


def pos(piece):
  return FEATURE.tokens.index(piece)


def logits(**by_position):
  out = np.full(T, -10.0)
  for p, value in by_position.items():
    out[int(p[1:])] = value
  return out


def run(start, end, **kwargs):
  return pp.postprocess([EXAMPLE], [FEATURE], {1: (start, end)}, **kwargs)


def test_answer_maps_back_to_original_casing_without_trailing_possessive():
  start = logits(**{f"p{pos('steve')}": 5.0})
  end = logits(**{f"p{pos('smith')}": 5.0})
  result = run(start, end)
  # Tokens "steve smith" come from the words "Steve Smith's": the "'s" is dropped.
  assert result.predictions["q"] == "Steve Smith"


def test_answer_inside_punctuated_word_keeps_original_text():
  result = run(logits(**{f"p{pos('paris')}": 5.0}), logits(**{f"p{pos('paris')}": 5.0}))
  assert result.predictions["q"] == "Paris"
  # Accented words come back with their accents.
  result = run(logits(**{f"p{pos('cafe')}": 5.0}), logits(**{f"p{pos('##eme')}": 5.0}))
  assert result.predictions["q"] == "Café Crème"


def test_nbest_is_ordered_by_summed_logits_with_softmax_probabilities():
  s = logits(**{f"p{pos('steve')}": 4.0, f"p{pos('house')}": 3.5})
  e = logits(**{f"p{pos('house')}": 2.0, f"p{pos('smith')}": 1.0})
  result = run(s, e, n_best_size=3)
  nbest = result.nbest["q"]
  # steve..house = 6, house..house = 5.5, steve..smith = 5.
  assert [c["text"] for c in nbest] == ["Steve Smith's house", "house", "Steve Smith"]
  totals = [c["start_logit"] + c["end_logit"] for c in nbest]
  assert totals == sorted(totals, reverse=True)
  probs = [c["probability"] for c in nbest]
  assert sum(probs) == pytest.approx(1.0)
  assert probs[0] == pytest.approx(np.exp(6) / (np.exp(6) + np.exp(5.5) + np.exp(5)))


def test_spans_longer_than_max_answer_length_or_reversed_are_dropped():
  s = logits(**{f"p{pos('steve')}": 9.0, f"p{pos('house')}": 1.0})
  e = logits(**{f"p{pos('##eme')}": 9.0, f"p{pos('house')}": 1.0})
  # steve..##eme is 12 pieces; with a limit of 4, the best allowed span is house..house.
  assert run(s, e, max_answer_length=4).predictions["q"] == "house"
  assert run(s, e, max_answer_length=30).predictions["q"] == " ".join(DOC)
  # End before start is never an answer: house..steve (18) loses to house..paris (10),
  # which keeps the original's "(" and drops its ")." after the last piece.
  s2 = logits(**{f"p{pos('house')}": 9.0, f"p{pos('paris')}": 1.0})
  e2 = logits(**{f"p{pos('steve')}": 9.0, f"p{pos('paris')}": 1.0})
  assert run(s2, e2).predictions["q"] == "house (in Paris"


def test_starts_outside_max_context_are_dropped():
  feature = make_feature(max_context=lambda p: p != pos("steve"))
  s = logits(**{f"p{pos('steve')}": 9.0, f"p{pos('house')}": 1.0})
  e = logits(**{f"p{pos('house')}": 9.0})
  result = pp.postprocess([EXAMPLE], [feature], {1: (s, e)})
  assert result.predictions["q"] == "house"


def test_best_span_is_taken_across_windows():
  f1, f2 = make_feature(1, 0), make_feature(2, 1)
  weak = (logits(**{f"p{pos('steve')}": 1.0}), logits(**{f"p{pos('steve')}": 1.0}))
  strong = (logits(**{f"p{pos('house')}": 3.0}), logits(**{f"p{pos('house')}": 3.0}))
  result = pp.postprocess([EXAMPLE], [f1, f2], {1: weak, 2: strong})
  assert [c["text"] for c in result.nbest["q"]][:2] == ["house", "Steve"]


def test_v2_null_answer_wins_when_null_odds_exceed_threshold():
  s = logits(p0=4.0, **{f"p{pos('house')}": 3.0})
  e = logits(p0=4.0, **{f"p{pos('house')}": 3.0})
  result = run(s, e, version_2_with_negative=True, null_score_diff_threshold=0.0)
  # Null score 8, best span 6: odds 2 > 0.
  assert result.null_odds["q"] == pytest.approx(2.0)
  assert result.predictions["q"] == ""
  assert result.nbest["q"][0]["text"] == ""
  assert result.best_non_null["q"] == "house"
  assert result.with_threshold(2.5) == {"q": "house"}
  result = run(s, e, version_2_with_negative=True, null_score_diff_threshold=3.0)
  assert result.predictions["q"] == "house"


def test_get_final_text_falls_back_to_original_when_unalignable():
  assert pp.get_final_text("smith", "Steve Smith's", True) == "Smith"
  assert pp.get_final_text("london", "Steve Smith's", True) == "Steve Smith's"


def test_prediction_files_are_written(tmp_path):
  s = logits(p0=1.0, **{f"p{pos('house')}": 3.0})
  result = run(s, s, version_2_with_negative=True)
  paths = pp.write_prediction_files(result, str(tmp_path))
  assert sorted(os.listdir(str(tmp_path))) == ["nbest_predictions.json", "null_odds.json",
                                               "predictions.json"]
  with open(paths["predictions"]) as f:
    assert json.load(f) == {"q": "house"}
  with open(paths["null_odds"]) as f:
    assert json.load(f) == {"q": pytest.approx(2.0 - 6.0)}
