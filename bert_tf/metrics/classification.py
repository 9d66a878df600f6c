"""GLUE metrics in NumPy: accuracy, F1, Matthews correlation, Pearson and Spearman.

Each takes 1-D arrays of labels and predictions and returns a Python float, the way
the GLUE benchmark defines the metric (binary F1 of the positive class 1, Spearman
as the Pearson correlation of tie-averaged ranks).
"""

from typing import Callable, Dict, Sequence

import numpy as np


def _as_1d(name: str, values) -> np.ndarray:
  array = np.asarray(values)
  if array.ndim != 1:
    raise ValueError(f"{name} must be 1-D, got shape {array.shape}")
  return array


def _check_pair(labels, predictions):
  labels = _as_1d("labels", labels)
  predictions = _as_1d("predictions", predictions)
  if labels.shape != predictions.shape:
    raise ValueError(f"labels {labels.shape} and predictions {predictions.shape} differ in size")
  if labels.size == 0:
    raise ValueError("metrics need at least one example")
  return labels, predictions


def accuracy(labels, predictions) -> float:
  """Fraction of predictions equal to labels."""
  labels, predictions = _check_pair(labels, predictions)
  return float(np.mean(labels == predictions))


def f1_score(labels, predictions, positive_label: int = 1) -> float:
  """Binary F1 of `positive_label`; 0.0 when there is no true positive."""
  labels, predictions = _check_pair(labels, predictions)
  tp = float(np.sum((predictions == positive_label) & (labels == positive_label)))
  fp = float(np.sum((predictions == positive_label) & (labels != positive_label)))
  fn = float(np.sum((predictions != positive_label) & (labels == positive_label)))
  if tp == 0.0:
    return 0.0
  precision = tp / (tp + fp)
  recall = tp / (tp + fn)
  return 2.0 * precision * recall / (precision + recall)


def matthews_corrcoef(labels, predictions) -> float:
  """Matthews correlation of binary labels (CoLA); 0.0 when undefined."""
  labels, predictions = _check_pair(labels, predictions)
  labels = labels.astype(bool)
  predictions = predictions.astype(bool)
  tp = float(np.sum(predictions & labels))
  tn = float(np.sum(~predictions & ~labels))
  fp = float(np.sum(predictions & ~labels))
  fn = float(np.sum(~predictions & labels))
  denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
  if denominator == 0.0:
    return 0.0
  return float((tp * tn - fp * fn) / denominator)


def pearson_corrcoef(x, y) -> float:
  """Pearson correlation; 0.0 when either input is constant."""
  x, y = _check_pair(x, y)
  x = x.astype(np.float64) - np.mean(x, dtype=np.float64)
  y = y.astype(np.float64) - np.mean(y, dtype=np.float64)
  denominator = np.sqrt(np.sum(x * x) * np.sum(y * y))
  if denominator == 0.0:
    return 0.0
  return float(np.sum(x * y) / denominator)


def rank_with_ties(values) -> np.ndarray:
  """1-based ranks where tied values share the mean of the ranks they span.

  Args:
    values: 1-D array.

  Returns:
    float64 array of the same length, e.g. [10, 20, 20, 5] -> [2, 3.5, 3.5, 1].
  """
  values = _as_1d("values", values)
  order = np.argsort(values, kind="mergesort")
  sorted_values = values[order]
  ranks = np.empty(len(values), dtype=np.float64)
  # Boundaries of runs of equal values in sorted order.
  starts = np.concatenate([[0], np.nonzero(sorted_values[1:] != sorted_values[:-1])[0] + 1])
  ends = np.concatenate([starts[1:], [len(values)]])
  for start, end in zip(starts, ends):
    ranks[order[start:end]] = (start + 1 + end) / 2.0
  return ranks


def spearman_corrcoef(x, y) -> float:
  """Spearman rank correlation with tie-averaged ranks."""
  x, y = _check_pair(x, y)
  return pearson_corrcoef(rank_with_ties(x), rank_with_ties(y))


# Which metrics each named metric set reports; the first is the one to select models by.
GLUE_METRICS: Dict[str, Sequence[str]] = {
    "accuracy": ("accuracy",),
    "accuracy_f1": ("f1", "accuracy"),
    "matthews_corrcoef": ("matthews_corrcoef", "accuracy"),
    "pearson_spearman": ("pearson", "spearman"),
}

_FUNCTIONS: Dict[str, Callable] = {
    "accuracy": accuracy,
    "f1": f1_score,
    "matthews_corrcoef": matthews_corrcoef,
    "pearson": pearson_corrcoef,
    "spearman": spearman_corrcoef,
}


def glue_metrics(metric: str, labels, predictions) -> Dict[str, float]:
  """Computes a named metric set (a key of GLUE_METRICS).

  Args:
    metric: accuracy, accuracy_f1, matthews_corrcoef or pearson_spearman.
    labels: 1-D int class ids, or float scores for pearson_spearman.
    predictions: the same shape as labels.

  Returns:
    {metric name: value}.
  """
  if metric not in GLUE_METRICS:
    raise ValueError(f"Unknown metric '{metric}'; choose one of {', '.join(GLUE_METRICS)}")
  return {name: _FUNCTIONS[name](labels, predictions) for name in GLUE_METRICS[metric]}
