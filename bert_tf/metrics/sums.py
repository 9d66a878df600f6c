"""Training metrics as decomposable sums, written with keras.ops for every backend.

A training metric is a (numerator, denominator) pair of float32 scalars that a trainer
adds up over replicas and steps before dividing, so that it is exact under any split
of the batch.
"""

from typing import Tuple

from keras import ops


def ratio(numerator, denominator) -> Tuple[object, object]:
  """A (numerator, denominator) metric pair as float32 scalars."""
  return ops.cast(numerator, "float32"), ops.cast(denominator, "float32")


def predicted_ids(logits):
  """The arg-max over the last axis: float [..., C] -> int32 [...]."""
  return ops.cast(ops.argmax(logits, axis=-1), "int32")


def correct(predictions, labels):
  """1.0 where the int predictions equal the labels, else 0.0: float32, their shape."""
  return ops.cast(ops.equal(ops.cast(predictions, "int32"), ops.cast(labels, "int32")),
                  "float32")


def accuracy_sums(logits, labels, weights=None) -> Tuple[object, object]:
  """(weighted correct arg-maxes, weight total) of logits [..., C] and labels [...];
  every label weighs 1 without weights."""
  hits = correct(predicted_ids(logits), labels)
  if weights is None:
    return ratio(ops.sum(hits), ops.size(hits))
  weights = ops.cast(weights, "float32")
  return ratio(ops.sum(hits * weights), ops.sum(weights))
