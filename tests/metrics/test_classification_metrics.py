"""GLUE metrics against values computed by hand."""

import numpy as np
import pytest

from bert_tf.metrics import classification as m


def test_accuracy_is_fraction_of_equal_predictions():
  assert m.accuracy([1, 0, 1, 1], [1, 1, 1, 0]) == 0.5


def test_f1_of_positive_class_matches_hand_count():
  # tp=2, fp=1, fn=1: precision = recall = 2/3.
  assert m.f1_score([1, 1, 0, 0, 1], [1, 0, 1, 0, 1]) == pytest.approx(2 / 3)


def test_f1_is_zero_without_true_positives():
  assert m.f1_score([1, 0], [0, 1]) == 0.0


def test_matthews_matches_hand_count():
  # tp=2, tn=1, fp=1, fn=1: (2*1 - 1*1) / sqrt(3*3*2*2) = 1/6.
  assert m.matthews_corrcoef([1, 1, 0, 0, 1], [1, 0, 1, 0, 1]) == pytest.approx(1 / 6)


def test_matthews_is_zero_for_constant_predictions_and_one_for_perfect():
  assert m.matthews_corrcoef([1, 0, 1], [1, 1, 1]) == 0.0
  assert m.matthews_corrcoef([1, 0, 1], [1, 0, 1]) == pytest.approx(1.0)
  assert m.matthews_corrcoef([1, 0, 1], [0, 1, 0]) == pytest.approx(-1.0)


def test_pearson_matches_hand_value():
  # Centered x = [-1, 0, 1], y = [-5/3, -2/3, 7/3]: r = 4 / sqrt(2 * 78/9) = 12/sqrt(156).
  assert m.pearson_corrcoef([1, 2, 3], [1, 2, 5]) == pytest.approx(12 / np.sqrt(156))


def test_ranks_average_over_ties():
  np.testing.assert_array_equal(m.rank_with_ties([10, 20, 20, 5]), [2, 3.5, 3.5, 1])
  np.testing.assert_array_equal(m.rank_with_ties([7, 7, 7]), [2, 2, 2])


def test_spearman_with_ties_matches_hand_value():
  # Ranks x = [1, 2.5, 2.5, 4], y = [1, 3, 2, 4]: r = 4.5 / sqrt(4.5 * 5).
  assert m.spearman_corrcoef([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / np.sqrt(22.5))


def test_spearman_is_invariant_to_monotone_transform():
  x = np.array([0.3, 1.2, 4.0, 2.2, 3.1])
  assert m.spearman_corrcoef(x, np.exp(x)) == pytest.approx(1.0)


def test_glue_metric_sets_name_their_values():
  result = m.glue_metrics("accuracy_f1", [1, 1, 0, 0, 1], [1, 0, 1, 0, 1])
  assert result == pytest.approx({"f1": 2 / 3, "accuracy": 0.6})
  assert set(m.glue_metrics("pearson_spearman", [1., 2., 3.], [1., 2., 5.])) == {
      "pearson", "spearman"}


def test_unknown_metric_and_mismatched_sizes_are_errors():
  with pytest.raises(ValueError, match="Unknown metric"):
    m.glue_metrics("bleu", [1], [1])
  with pytest.raises(ValueError, match="differ in size"):
    m.accuracy([1, 0], [1])
