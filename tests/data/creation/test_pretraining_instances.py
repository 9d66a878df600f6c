"""Instance creation, truncation, masking and the encoded features against the original
rules."""

import random

import numpy as np
import pytest
import tensorflow as tf

import pretraining_fixtures as fx
from bert_tf import constants
from bert_tf.data.records import example_encoding
from bert_tf.data.creation import pretraining_instances as pi

SEQ = 128
PRED = 20


def _original_truncate_lengths(a, b, max_num_tokens):
  """The original truncate_seq_pair's length bookkeeping, one token at a time."""
  while a + b > max_num_tokens:
    if a > b:
      a -= 1
    else:
      b -= 1
  return a, b


def _instances(num_documents=300, seed=0, max_seq_length=SEQ, short_seq_prob=0.1, dupe=2):
  # Sentences well below the target length, so chunks hold several, as in real text.
  tokens, so, do = fx.random_id_documents(num_documents, seed, min_sentences=2,
                                          max_sentences=30, min_len=3, max_len=12)
  spans, short_passes = pi.create_instance_spans(so, do, max_seq_length, short_seq_prob, dupe,
                                                 random.Random(seed))
  return tokens, so, do, spans, short_passes


def _masked_batch(whole_word=False, seed=0, num_documents=600, masked_lm_prob=0.15):
  tokens, _, _, spans, _ = _instances(num_documents, seed)
  rng = np.random.default_rng(seed)
  spans = pi.truncate_spans(spans, SEQ, rng)
  special = fx.special_ids()
  ids, seg, mask, cand = pi.build_sequences(tokens, spans, SEQ, special)
  masked = pi.mask_sequences(ids, mask, cand, masked_lm_prob, PRED, special, rng, whole_word)
  return ids, seg, mask, cand, masked, spans


def test_truncated_lengths_equal_the_original_token_by_token_loop():
  rng = np.random.default_rng(0)
  a = rng.integers(1, 200, 2000)
  b = rng.integers(1, 200, 2000)
  for limit in (5, 61, 125):
    new_a, new_b = pi.truncated_lengths(a, b, limit)
    expected = np.array([_original_truncate_lengths(x, y, limit) for x, y in zip(a, b)])
    np.testing.assert_array_equal(new_a, expected[:, 0])
    np.testing.assert_array_equal(new_b, expected[:, 1])


def test_truncation_keeps_a_contiguous_slice_and_removes_front_half_the_time():
  tokens, _, _, spans, _ = _instances(num_documents=400)
  cut = pi.truncate_spans(spans, SEQ, np.random.default_rng(1))
  assert np.all(cut.a_length + cut.b_length <= SEQ - 3)
  assert np.all(cut.a_length >= 1) and np.all(cut.b_length >= 1)
  assert np.all(cut.a_start >= spans.a_start)
  assert np.all(cut.a_start + cut.a_length <= spans.a_start + spans.a_length)
  assert np.all(cut.b_start + cut.b_length <= spans.b_start + spans.b_length)
  removed = (spans.a_length - cut.a_length).sum() + (spans.b_length - cut.b_length).sum()
  from_front = (cut.a_start - spans.a_start).sum() + (cut.b_start - spans.b_start).sum()
  assert removed > 1000
  assert abs(from_front / removed - 0.5) < 0.03


def test_segments_are_consecutive_sentences_and_random_b_comes_from_another_document():
  tokens, so, do, spans, _ = _instances()
  sentence_starts = set(so.tolist())
  doc_of_token = np.repeat(np.arange(len(do) - 1), np.diff(so[do]))
  for i in range(len(spans)):
    a0, a1 = spans.a_start[i], spans.a_start[i] + spans.a_length[i]
    b0, b1 = spans.b_start[i], spans.b_start[i] + spans.b_length[i]
    # Before truncation every segment starts and ends on sentence boundaries.
    assert {a0, a1, b0, b1} <= sentence_starts
    assert doc_of_token[a0] == doc_of_token[a1 - 1]
    assert doc_of_token[b0] == doc_of_token[b1 - 1]
    if spans.is_random_next[i]:
      assert doc_of_token[b0] != doc_of_token[a0]
    else:
      assert b0 == a1


def test_next_sentence_labels_are_balanced_within_3_points():
  *_, spans, _ = _instances(num_documents=400, dupe=3)
  assert len(spans) > 3000
  # A one-sentence chunk always takes a random B, as in the original; the coin decides
  # the rest.
  assert np.all(spans.is_random_next[spans.single_sentence])
  two_or_more = ~spans.single_sentence
  assert abs(spans.is_random_next[two_or_more].mean() - 0.5) < 0.03
  assert abs(spans.is_random_next.mean() - 0.5 - 0.5 * spans.single_sentence.mean()) < 0.03


def test_share_of_shortened_document_passes_is_near_short_seq_prob():
  _, _, do, spans, short_passes = _instances(num_documents=2000, short_seq_prob=0.1, dupe=2)
  passes = 2 * (len(do) - 1)
  assert abs(short_passes / passes - 0.1) < 0.02
  # Short targets make more instances per pass, so their instance share is larger.
  assert spans.short_target.mean() >= short_passes / passes


def test_masked_fraction_of_non_special_tokens_is_15_percent_within_1_point():
  _, _, mask, _, masked, spans = _masked_batch()
  assert len(spans) > 3000
  non_special = mask.sum() - 3 * len(spans)
  assert abs(masked.masked_lm_weights.sum() / non_special - 0.15) < 0.01


@pytest.mark.parametrize("whole_word", [False, True])
def test_masked_positions_split_80_10_10_within_2_points(whole_word):
  ids, _, _, _, masked, _ = _masked_batch(whole_word)
  counts = masked.outcome_counts
  total = sum(counts.values())
  assert total == masked.masked_lm_weights.sum()
  assert abs(counts[pi.MASKED] / total - 0.8) < 0.02
  assert abs(counts[pi.RANDOM] / total - 0.1) < 0.02
  assert abs(counts[pi.KEPT] / total - 0.1) < 0.02
  # The recorded outcomes agree with the ids written.
  rows, slots = np.nonzero(masked.masked_lm_weights)
  pos = masked.masked_lm_positions[rows, slots]
  became_mask = masked.input_ids[rows, pos] == fx.special_ids().mask_id
  assert became_mask.sum() >= counts[pi.MASKED]
  np.testing.assert_array_equal(masked.masked_lm_ids[rows, slots], ids[rows, pos])


def test_number_of_predictions_follows_the_original_formula():
  _, _, mask, _, masked, _ = _masked_batch()
  lengths = mask.sum(axis=1)
  expected = np.minimum(PRED, np.maximum(1, np.array([int(round(n * 0.15)) for n in lengths])))
  np.testing.assert_array_equal(masked.masked_lm_weights.sum(axis=1), expected)


def test_masked_positions_are_sorted_distinct_and_never_special():
  ids, _, mask, cand, masked, _ = _masked_batch()
  special = fx.special_ids()
  for row in range(len(ids)):
    n = int(masked.masked_lm_weights[row].sum())
    pos = masked.masked_lm_positions[row, :n]
    assert np.all(np.diff(pos) > 0)
    assert np.all(cand[row, pos])
    assert not np.isin(ids[row, pos], [special.cls_id, special.sep_id]).any()
    assert np.all(masked.masked_lm_positions[row, n:] == 0)
    assert np.all(masked.masked_lm_ids[row, n:] == 0)


def test_whole_word_masking_masks_every_piece_of_a_chosen_word():
  ids, _, _, cand, masked, _ = _masked_batch(whole_word=True)
  special = fx.special_ids()
  checked = 0
  for row in range(len(ids)):
    n = int(masked.masked_lm_weights[row].sum())
    chosen = set(masked.masked_lm_positions[row, :n].tolist())
    # Words: a candidate starts a word unless it is "##" and a candidate precedes it.
    cand_pos = np.flatnonzero(cand[row])
    words, prev = [], None
    for p in cand_pos:
      if special.is_continuation[ids[row, p]] and prev is not None:
        words[-1].append(p)
      else:
        words.append([p])
      prev = p
    for word in words:
      hits = sum(p in chosen for p in word)
      assert hits in (0, len(word))
      checked += len(word) > 1 and hits > 0
  assert checked > 50


def test_sequences_are_cls_a_sep_b_sep_padded_with_zeros():
  tokens, _, _, spans, _ = _instances(num_documents=50)
  spans = pi.truncate_spans(spans, SEQ, np.random.default_rng(0))
  special = fx.special_ids()
  ids, seg, mask, cand = pi.build_sequences(tokens, spans, SEQ, special)
  for i in range(len(spans)):
    la, lb = spans.a_length[i], spans.b_length[i]
    a = tokens[spans.a_start[i]:spans.a_start[i] + la]
    b = tokens[spans.b_start[i]:spans.b_start[i] + lb]
    expected = np.concatenate([[special.cls_id], a, [special.sep_id], b, [special.sep_id]])
    n = len(expected)
    np.testing.assert_array_equal(ids[i, :n], expected)
    assert np.all(ids[i, n:] == 0) and np.all(mask[i, n:] == 0) and np.all(mask[i, :n] == 1)
    np.testing.assert_array_equal(seg[i, :n], [0] * (la + 2) + [1] * (lb + 1))
    assert np.all(seg[i, n:] == 0)


def test_serialized_examples_equal_protobuf_encoded_examples():
  ids, seg, mask, _, masked, spans = _masked_batch(num_documents=30)
  features = pi.example_features(ids, mask, seg, masked, spans.is_random_next)
  features["big_ids"] = np.array([[0, 127, 128, 16383, 16384, 2**21, 2**40]] * len(ids))
  records = example_encoding.serialize_examples(features)
  for i in (0, 1, len(records) - 1):
    def int_feature(values):
      return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))
    expected = tf.train.Example(features=tf.train.Features(feature={
        name: (tf.train.Feature(float_list=tf.train.FloatList(value=value[i].tolist()))
               if value.dtype == np.float32 else int_feature(np.atleast_1d(value[i])))
        for name, value in features.items()}))
    assert tf.train.Example.FromString(records[i]) == expected


def test_special_ids_require_every_special_token_and_name_the_missing_one():
  tokens = [t for t in fx.VOCAB if t != constants.MASK_TOKEN]
  with pytest.raises(ValueError, match=r"\[MASK\]"):
    pi.SpecialIds.from_vocab(tokens)
