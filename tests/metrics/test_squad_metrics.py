"""SQuAD exact match and F1 against hand-computed values of the official definitions."""

import pytest

from bert_tf.metrics import squad as m


@pytest.mark.parametrize("text,expected", [
    ("The Cat", "cat"),
    ("  a  dog,  an apple!  ", "dog apple"),
    ("Theatre of the Absurd.", "theatre of absurd"),
    ("U.S.A.", "usa"),
    ("an", ""),
    ("Café—élan", "café—élan"),  # Only ASCII punctuation is dropped.
])
def test_normalize_answer_lowercases_strips_punctuation_and_articles(text, expected):
  assert m.normalize_answer(text) == expected


def test_exact_match_ignores_case_articles_and_punctuation():
  assert m.exact_match_score("the Eiffel Tower.", "Eiffel tower") == 1.0
  assert m.exact_match_score("Eiffel", "Eiffel Tower") == 0.0


def test_f1_is_token_bag_overlap_by_hand():
  # pred: [eiffel, tower, paris]; gold: [eiffel, tower]; 2 common.
  # precision 2/3, recall 1, F1 = 2 * (2/3) / (5/3) = 0.8.
  assert m.f1_score("The Eiffel Tower, Paris", "Eiffel Tower") == pytest.approx(0.8)
  # Repeated tokens count as a multiset: pred [a1, a1], gold [a1]: common 1.
  # precision 1/2, recall 1 -> 2/3.
  assert m.f1_score("x x", "x") == pytest.approx(2 / 3)
  assert m.f1_score("paris", "london") == 0.0


def test_f1_with_empty_sides_scores_one_only_when_both_empty():
  assert m.f1_score("", "") == 1.0
  assert m.f1_score("the", "") == 1.0  # "the" normalizes to nothing.
  assert m.f1_score("", "Paris") == 0.0
  assert m.f1_score("Paris", "") == 0.0


def _dataset(questions):
  return [{"paragraphs": [{"context": "c", "qas": questions}]}]


def test_evaluate_v1_takes_max_over_gold_and_counts_missing_as_zero():
  data = _dataset([
      {"id": "1", "answers": [{"text": "Tower"}, {"text": "the Eiffel Tower"}]},
      {"id": "2", "answers": [{"text": "New York City"}]},
      {"id": "3", "answers": [{"text": "1889"}]},
  ])
  preds = {"1": "Eiffel Tower", "2": "York City"}
  scores = m.evaluate_v1(data, preds)
  # EM: q1 1 (matches the second gold), q2 0, q3 missing 0 -> 33.33.
  assert scores["exact_match"] == pytest.approx(100 / 3)
  # F1: q1 1; q2 precision 1, recall 2/3 -> 0.8; q3 0 -> (1.8 / 3) * 100 = 60.
  assert scores["f1"] == pytest.approx(60.0)


def test_evaluate_v2_unanswerable_scores_one_only_for_empty_prediction():
  data = _dataset([
      {"id": "a", "answers": [{"text": "Paris"}]},
      {"id": "n1", "answers": [], "is_impossible": True},
      {"id": "n2", "answers": [], "is_impossible": True},
  ])
  scores = m.evaluate_v2(data, {"a": "Paris", "n1": "", "n2": "London"})
  assert scores["exact_match"] == pytest.approx(200 / 3)
  assert scores["HasAns_exact"] == 100.0 and scores["HasAns_total"] == 1
  assert scores["NoAns_exact"] == 50.0 and scores["NoAns_total"] == 2


def test_best_threshold_maximizes_f1_by_hand():
  data = _dataset([
      {"id": "a", "answers": [{"text": "Paris"}]},
      {"id": "b", "answers": [{"text": "Rome"}]},
      {"id": "n", "answers": [], "is_impossible": True},
  ])
  preds = {"a": "Paris", "b": "Milan", "n": "Oslo"}
  # Visiting by increasing odds: a (+1), n (-1), b (+0). Start at 1 (one NoAns).
  # Scores after each: 2 at a, 1 at n, 1 at b; best 2/3 with threshold = odds(a).
  odds = {"a": -2.0, "n": 0.5, "b": 3.0}
  scores = m.evaluate_v2(data, preds, odds, null_threshold=1.0)
  assert scores["best_f1"] == pytest.approx(200 / 3)
  assert scores["best_f1_thresh"] == -2.0
  # With threshold 1.0 only b (odds 3) becomes "": a 1, b 0 (gold Rome), n 0 -> 33.3.
  assert scores["exact_match"] == pytest.approx(100 / 3)
