"""The project's metrics against reference implementations.

GLUE's F1, Matthews correlation, Pearson and Spearman against scikit-learn and SciPy;
NER entity scores against seqeval (its default, conlleval-compatible mode); SQuAD v1.1
exact match and F1 against numbers worked out by hand from the official script's
definitions. scikit-learn, SciPy and seqeval are test-only dependencies.
"""

import numpy as np
import pytest

from bert_tf.metrics import classification
from bert_tf.metrics import squad
from bert_tf.metrics import tagging

RANDOM_SEEDS = range(20)


def _binary_pairs():
  """Random label/prediction pairs, then edge cases: constant, all wrong, all right."""
  for seed in RANDOM_SEEDS:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 60))
    yield rng.integers(0, 2, n), rng.integers(0, 2, n)
  labels = np.array([1, 0, 1, 1, 0, 0, 1])
  yield labels, np.ones_like(labels)
  yield labels, np.zeros_like(labels)
  yield labels, 1 - labels
  yield labels, labels
  yield np.zeros(5, int), np.zeros(5, int)
  yield np.ones(5, int), np.ones(5, int)


@pytest.mark.parametrize("labels,predictions", list(_binary_pairs()))
def test_f1_and_matthews_match_scikit_learn(labels, predictions):
  sklearn_metrics = pytest.importorskip("sklearn.metrics")
  assert classification.f1_score(labels, predictions) == pytest.approx(
      sklearn_metrics.f1_score(labels, predictions, pos_label=1, zero_division=0.0), abs=1e-12)
  assert classification.matthews_corrcoef(labels, predictions) == pytest.approx(
      sklearn_metrics.matthews_corrcoef(labels, predictions), abs=1e-12)


def _score_pairs():
  """Random scores, scores with many ties (STS-B's 0.2 steps), and a monotone pair."""
  for seed in RANDOM_SEEDS:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 80))
    yield rng.uniform(0, 5, n), rng.normal(2.5, 1.0, n)
    yield np.round(rng.uniform(0, 5, n) * 5) / 5, np.round(rng.uniform(0, 5, n))
  x = np.array([1.0, 2.0, 2.0, 3.0, 5.0, 5.0, 5.0])
  yield x, x ** 3
  yield x, -x


@pytest.mark.parametrize("x,y", list(_score_pairs()))
def test_pearson_and_spearman_match_scipy(x, y):
  stats = pytest.importorskip("scipy.stats")
  assert classification.pearson_corrcoef(x, y) == pytest.approx(stats.pearsonr(x, y)[0],
                                                                abs=1e-10)
  assert classification.spearman_corrcoef(x, y) == pytest.approx(stats.spearmanr(x, y)[0],
                                                                  abs=1e-10)


def test_constant_predictions_give_zero_correlation_where_scipy_has_none():
  stats = pytest.importorskip("scipy.stats")
  x = np.array([0.5, 1.0, 4.0, 2.5])
  constant = np.full(4, 3.0)
  with pytest.warns(Warning):
    assert np.isnan(stats.pearsonr(x, constant)[0])
  assert classification.pearson_corrcoef(x, constant) == 0.0
  assert classification.spearman_corrcoef(x, constant) == 0.0


TYPES = ("PER", "LOC", "ORG")


def _random_iob2(rng, length):
  """A valid IOB2 sequence: every entity starts with B-, I- continues one of its type."""
  tags, inside = [], None
  for _ in range(length):
    choice = rng.integers(0, 4)
    if choice == 0 or (choice == 1 and inside is None):
      tags.append("O")
      inside = None
    elif choice == 1:
      tags.append("I-" + inside)
    else:
      inside = TYPES[rng.integers(0, len(TYPES))]
      tags.append("B-" + inside)
  return tags


def _to_iob1(tags):
  """IOB2 -> IOB1: B- only where an entity directly follows one of the same type."""
  out = []
  for i, tag in enumerate(tags):
    if tag.startswith("B-") and not (i > 0 and tags[i - 1] != "O"
                                     and tags[i - 1][2:] == tag[2:]):
      tag = "I-" + tag[2:]
    out.append(tag)
  return out


def _random_iob_pairs(rng, scheme):
  gold, pred = [], []
  for _ in range(int(rng.integers(3, 12))):
    length = int(rng.integers(1, 15))
    g = _random_iob2(rng, length)
    # Predictions: the gold tags with about a third of them replaced.
    p = [t if rng.random() > 0.35 else str(rng.choice(["O", "B-PER", "I-PER", "B-LOC",
                                                        "I-ORG"]))
         for t in g]
    gold.append(_to_iob1(g) if scheme == "iob1" else g)
    pred.append(_to_iob1(p) if scheme == "iob1" else p)
  return gold, pred


@pytest.mark.parametrize("scheme", ["iob1", "iob2"])
@pytest.mark.parametrize("seed", RANDOM_SEEDS)
def test_entity_scores_match_seqeval(scheme, seed):
  seqeval = pytest.importorskip("seqeval.metrics")
  gold, pred = _random_iob_pairs(np.random.default_rng(seed), scheme)
  ours = tagging.conll_precision_recall_f1(gold, pred)
  kwargs = dict(zero_division=0)
  assert ours["precision"] == pytest.approx(seqeval.precision_score(gold, pred, **kwargs))
  assert ours["recall"] == pytest.approx(seqeval.recall_score(gold, pred, **kwargs))
  assert ours["f1"] == pytest.approx(seqeval.f1_score(gold, pred, **kwargs))
  assert ours["accuracy"] == pytest.approx(seqeval.accuracy_score(gold, pred))
  report = seqeval.classification_report(gold, pred, output_dict=True, **kwargs)
  for entity_type in TYPES:
    if entity_type in report and f"{entity_type}/f1" in ours:
      assert ours[f"{entity_type}/f1"] == pytest.approx(report[entity_type]["f1-score"])


def test_iob1_and_iob2_spellings_of_the_same_entities_score_alike_in_both():
  seqeval = pytest.importorskip("seqeval.metrics")
  gold, pred = _random_iob_pairs(np.random.default_rng(7), "iob2")
  gold1, pred1 = [_to_iob1(s) for s in gold], [_to_iob1(s) for s in pred]
  assert tagging.conll_precision_recall_f1(gold1, pred1)["f1"] == pytest.approx(
      tagging.conll_precision_recall_f1(gold, pred)["f1"])
  assert seqeval.f1_score(gold1, pred1) == pytest.approx(seqeval.f1_score(gold, pred))


# Each question: (id, gold answers, prediction or None when missing, EM, F1), the
# scores worked out by hand from the v1.1 definitions (lower case, drop punctuation,
# drop a/an/the, collapse white space; token-bag F1; max over the gold answers).
SQUAD_FIXTURE = [
    # Articles and case: "eiffel tower" == "eiffel tower".
    ("q1", ["Eiffel Tower", "the tower"], "the Eiffel Tower", 1.0, 1.0),
    # [paris, france] vs [paris]: P 1/2, R 1, F1 2/3.
    ("q2", ["Paris"], "Paris, France", 0.0, 2 / 3),
    # vs [1889]: F1 2/3; vs [in, year, 1889]: P 1, R 2/3, F1 0.8; the max is 0.8.
    ("q3", ["1889", "in the year 1889"], "in 1889", 0.0, 0.8),
    # The apostrophe goes: [gustave, eiffels, company] vs [gustave, eiffel]: P 1/3, R 1/2.
    ("q4", ["Gustave Eiffel"], "Gustave Eiffel's company", 0.0, 0.4),
    # Punctuation, an article and spaces: "dog" == "dog".
    ("q5", ["dog", "a cat"], "A   Dog!", 1.0, 1.0),
    # Repeated tokens count once per gold occurrence: common 2 of 3 predicted.
    ("q6", ["blue sky"], "blue blue sky", 0.0, 0.8),
    # No prediction: 0 and 0.
    ("q7", ["1887"], None, 0.0, 0.0),
]


def _squad_dataset():
  qas = [{"id": qid, "question": "?", "answers": [{"text": t, "answer_start": 0} for t in golds]}
         for qid, golds, _, _, _ in SQUAD_FIXTURE]
  return [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]


def test_squad_v1_scores_equal_the_official_definitions_worked_by_hand():
  predictions = {qid: p for qid, _, p, _, _ in SQUAD_FIXTURE if p is not None}
  golds = squad.gold_answers(_squad_dataset(), version_2=False)
  exact, f1 = squad.raw_scores(golds, predictions)
  for qid, _, _, expected_em, expected_f1 in SQUAD_FIXTURE:
    assert exact[qid] == expected_em, qid
    assert f1[qid] == pytest.approx(expected_f1), qid
  result = squad.evaluate_v1(_squad_dataset(), predictions)
  assert result["exact_match"] == pytest.approx(100 * 2 / 7)
  # (1 + 2/3 + 0.8 + 0.4 + 1 + 0.8 + 0) / 7 = 2/3.
  assert result["f1"] == pytest.approx(100 * 2 / 3)
