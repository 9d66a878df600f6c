"""Overlapping windows over a piece sequence longer than the model, and the window that
gives each piece its most context.

A sequence of `num_pieces` WordPieces is cut into windows of `max_tokens` pieces
starting `min(max_tokens, stride)` pieces apart, the last one holding what is left;
a piece is read from the window where min(pieces left of it, pieces right of it) +
0.01 * window length is largest, the first such window on ties (the original BERT's
SQuAD rule). SQuAD windows a context this way, tagging a sentence.

`doc_windows` and `max_context_span` (`is_max_context`) are the definition, in Python,
as SQuAD's feature writer and the predictor use it; `window_layout`,
`max_context_window` and `max_context_mask` compute the same in closed form with core
TensorFlow ops, for tf.data featurizers and serving graphs. The module imports
TensorFlow only when a closed form is built, so that the Python definition serves the
predictor without TensorFlow (bert_tf.inference).
"""

from typing import List, Sequence, Tuple

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


def max_context_span(spans: Sequence[Tuple[int, int]], position: int):
  """The index of the window of `spans` that gives token `position` its most context
  (the first on ties), None where no window holds it."""
  best_score, best_index = None, None
  for index, (start, length) in enumerate(spans):
    end = start + length - 1
    if position < start or position > end:
      continue
    score = min(position - start, end - position) + _LENGTH_WEIGHT * length
    if best_score is None or score > best_score:
      best_score, best_index = score, index
  return best_index


def is_max_context(spans: Sequence[Tuple[int, int]], span_index: int, position: int) -> bool:
  """Whether window `span_index` of `spans` gives token `position` its most context."""
  return span_index == max_context_span(spans, position)


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
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
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
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
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


def max_overlap(max_tokens: int, stride: int) -> int:
  """The most windows of at most max_tokens pieces, stride apart, that hold one piece."""
  return max(1, -(-max_tokens // max(1, min(stride, max_tokens))))


def sequence_windows(num_pieces, max_tokens, stride):
  """Every window of a batch of piece sequences, one row per window.

  Args:
    num_pieces: int64 [B], pieces per sequence.
    max_tokens: int64 [B] >= 1 (or a Python int for all), pieces per window.
    stride: Python int >= 1, pieces between window starts.

  Returns:
    (per_window, num_windows): per_window a dict of int64 [N] (N windows in all,
    sequence by sequence): example (the sequence's row), window (index within the
    sequence), window_start (its first piece in the sequence), window_length,
    piece_start (its first piece in the sequences laid end to end), and the
    sequence's num_windows, stride, max_tokens and num_pieces; num_windows int64 [B].
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  num_pieces = tf.cast(num_pieces, tf.int64)
  max_tokens = tf.broadcast_to(tf.cast(max_tokens, tf.int64), tf.shape(num_pieces))
  num_windows, window_stride = window_layout(num_pieces, max_tokens, stride)
  example = tf.repeat(tf.range(tf.size(num_windows, out_type=tf.int64)), num_windows)
  window = tf.ragged.range(num_windows).flat_values
  per_window = {name: tf.gather(value, example) for name, value in (
      ("num_windows", num_windows), ("stride", window_stride), ("max_tokens", max_tokens),
      ("num_pieces", num_pieces))}
  window_start = window * per_window["stride"]
  window_length = tf.maximum(
      tf.minimum(per_window["num_pieces"] - window_start, per_window["max_tokens"]), 0)
  sequence_start = tf.gather(tf.cumsum(num_pieces, exclusive=True), example)
  return dict(per_window, example=example, window=window, window_start=window_start,
              window_length=window_length,
              piece_start=sequence_start + window_start), num_windows

