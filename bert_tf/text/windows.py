"""Overlapping windows over a piece sequence longer than the model, and the window that
gives each piece its most context.

A sequence of `num_pieces` WordPieces is cut into windows of `max_tokens` pieces
starting `min(max_tokens, stride)` pieces apart, the last one holding what is left;
a piece is read from the window where min(pieces left of it, pieces right of it) +
0.01 * window length is largest, the first such window on ties (the original BERT's
SQuAD rule). SQuAD windows a context this way, tagging a sentence.

`doc_windows` and `is_max_context` are the definition, in Python, as SQuAD's feature
writer uses it; `window_layout`, `max_context_window` and `max_context_mask` compute the
same in closed form with core TensorFlow ops, for tf.data featurizers and serving
graphs.
"""

from typing import List, Sequence, Tuple

import tensorflow as tf

# The score's tie-breaker between windows that give a piece equal context.
_LENGTH_WEIGHT = 0.01


def doc_windows(num_tokens: int, max_tokens: int, doc_stride: int) -> List[Tuple[int, int]]:
  """(start, length) of the sliding windows over num_tokens tokens (none for none)."""
  spans = []
  start = 0
  while start < num_tokens:
    length = min(num_tokens - start, max_tokens)
    spans.append((start, length))
    if start + length == num_tokens:
      break
    start += min(length, doc_stride)
  return spans


def is_max_context(spans: Sequence[Tuple[int, int]], span_index: int, position: int) -> bool:
  """Whether window `span_index` of `spans` gives token `position` its most context."""
  best_score, best_index = None, None
  for index, (start, length) in enumerate(spans):
    end = start + length - 1
    if position < start or position > end:
      continue
    score = min(position - start, end - position) + _LENGTH_WEIGHT * length
    if best_score is None or score > best_score:
      best_score, best_index = score, index
  return span_index == best_index


def window_layout(num_pieces, max_tokens, stride):
  """The windows of `doc_windows`, in closed form.

  Args:
    num_pieces: int64 [B], pieces of each sequence.
    max_tokens: int64 [B] >= 1, pieces per window.
    stride: Python int >= 1.

  Returns:
    (num_windows, window_stride): int64 [B] each; a sequence without pieces gets one
    empty window.
  """
  window_stride = tf.minimum(max_tokens, stride)
  extra = tf.maximum(num_pieces - max_tokens, 0)
  return 1 + (extra + window_stride - 1) // window_stride, window_stride


def max_context_window(position, num_windows, stride, max_tokens, num_pieces, max_overlap):
  """The window that gives piece `position` its most context (`is_max_context`).

  Args:
    position: int64 tensor, piece index in the sequence.
    num_windows, stride, max_tokens, num_pieces: int64 tensors broadcastable with
      `position`, of the sequence (`window_layout`'s num_windows and window_stride).
    max_overlap: Python int, at least the most windows holding one piece
      (ceil(max_tokens / stride) is enough).

  Returns:
    int64 like `position`: the window's index, or 2**62 for a position outside the
    sequence.
  """
  # The windows holding `position` are among floor(position / stride) - j, j < max_overlap.
  last = tf.maximum(position, 0) // stride
  candidate = last[..., tf.newaxis] - tf.range(max_overlap, dtype=tf.int64)
  start = candidate * stride[..., tf.newaxis]
  length = tf.where(candidate == num_windows[..., tf.newaxis] - 1,
                    num_pieces[..., tf.newaxis] - start, max_tokens[..., tf.newaxis])
  pos = position[..., tf.newaxis]
  holds = (candidate >= 0) & (candidate < num_windows[..., tf.newaxis]) & (pos >= start) & (
      pos < start + length)
  score = (tf.cast(tf.minimum(pos - start, start + length - 1 - pos), tf.float64)
           + _LENGTH_WEIGHT * tf.cast(length, tf.float64))
  score = tf.where(holds, score, tf.constant(-float("inf"), tf.float64))
  best = tf.reduce_max(score, axis=-1, keepdims=True)
  big = tf.constant(2 ** 62, tf.int64)
  return tf.reduce_min(tf.where(holds & (score == best), candidate, big), axis=-1)


def max_context_mask(position, window, num_windows, stride, max_tokens, num_pieces,
                     max_overlap):
  """Whether `window` gives piece `position` its most context.

  Args:
    position: int64 [N, T], piece index in the sequence (any value off the window).
    window: int64 [N, 1] (broadcastable with `position`), the window's index.
    num_windows, stride, max_tokens, num_pieces, max_overlap: as `max_context_window`.

  Returns:
    bool like `position`.
  """
  return max_context_window(position, num_windows, stride, max_tokens, num_pieces,
                            max_overlap) == window
