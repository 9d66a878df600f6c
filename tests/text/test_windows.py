"""Windows over long piece sequences and the most-context window of each piece."""

import tensorflow as tf

from bert_tf.text import windows


def test_closed_form_layout_counts_the_python_windows():
  layout = windows.window_layout(tf.constant([0, 4, 10, 11, 30], tf.int64),
                                 tf.constant([4, 4, 4, 4, 7], tf.int64), 2)
  expected = [len(windows.doc_windows(n, m, 2)) for n, m in ((0, 4), (4, 4), (10, 4),
                                                             (11, 4), (30, 7))]
  assert layout[0].numpy().tolist() == [max(e, 1) for e in expected]


def test_closed_form_max_context_equals_the_python_definition():
  for num_pieces, max_tokens, stride in ((23, 7, 3), (14, 14, 5), (40, 6, 6), (9, 4, 1)):
    spans = windows.doc_windows(num_pieces, max_tokens, stride)
    n = len(spans)
    position = tf.constant([[s + i for i in range(max_tokens)] for s, _ in spans], tf.int64)
    column = lambda v: tf.fill([n, 1], tf.constant(v, tf.int64))  # pylint: disable=cell-var-from-loop
    mask = windows.max_context_mask(position, tf.range(n, dtype=tf.int64)[:, tf.newaxis],
                                    column(n), column(min(stride, max_tokens)),
                                    column(max_tokens), column(num_pieces),
                                    -(-max_tokens // stride))
    expected = [[i < length and windows.is_max_context(spans, w, start + i)
                 for i in range(max_tokens)] for w, (start, length) in enumerate(spans)]
    assert mask.numpy().tolist() == expected


def test_each_piece_is_read_where_its_smaller_side_context_is_largest():
  # 10 pieces, windows of 6 starting 2 apart: [0, 6), [2, 8), [4, 10).
  spans = windows.doc_windows(10, 6, 2)
  assert spans == [(0, 6), (2, 6), (4, 6)]
  owner = windows.max_context_window(tf.range(10, dtype=tf.int64), *(
      tf.constant(v, tf.int64) for v in (3, 2, 6, 10)), 3).numpy().tolist()
  # Piece 3: min(3, 2) = 2 in window 0, min(1, 4) = 1 in window 1; piece 4: min(4, 1) = 1,
  # min(2, 3) = 2, min(0, 5) = 0, so window 1; piece 6: min(4, 1) = 1 in window 1,
  # min(2, 3) = 2 in window 2.
  assert owner == [0, 0, 0, 0, 1, 1, 2, 2, 2, 2]
  assert [[windows.is_max_context(spans, w, p) for p in range(10)].count(True)
          for w in range(3)] == [4, 2, 4]


def test_most_context_windows_follow_each_other_along_the_sequence():
  # Each piece has exactly one window, and later pieces never go to an earlier window, so
  # concatenating each window's own pieces in window order gives the sequence back.
  for max_tokens in range(1, 14):
    for stride in range(1, max_tokens + 1):
      for num_pieces in range(0, 40):
        spans = windows.doc_windows(num_pieces, max_tokens, stride)
        owners = [[w for w in range(len(spans)) if windows.is_max_context(spans, w, p)]
                  for p in range(num_pieces)]
        assert all(len(o) == 1 for o in owners)
        assert [o[0] for o in owners] == sorted(o[0] for o in owners)
