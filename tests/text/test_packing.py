"""Tests of [CLS] A [SEP] B [SEP] packing and the original truncation rule."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import constants
from bert_tf.text import packing
from bert_tf.text import serving_ops

CLS, SEP, PAD = 101, 102, 0


def original_truncation(tokens_a, tokens_b, max_num_tokens):
  """The original truncate_seq_pair loop: pop from the longer, B on ties."""
  tokens_a, tokens_b = list(tokens_a), list(tokens_b)
  while len(tokens_a) + len(tokens_b) > max_num_tokens:
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()
  return tokens_a, tokens_b


def expected_packing(tokens_a, tokens_b, seq_length):
  if tokens_b is None:
    tokens_a = list(tokens_a)[:seq_length - 2]
    ids = [CLS] + tokens_a + [SEP]
    types = [0] * len(ids)
  else:
    tokens_a, tokens_b = original_truncation(tokens_a, tokens_b, seq_length - 3)
    ids = [CLS] + tokens_a + [SEP] + tokens_b + [SEP]
    types = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
  pad = seq_length - len(ids)
  return ids + [PAD] * pad, [1] * len(ids) + [0] * pad, types + [0] * pad


def test_truncation_matches_the_original_loop_for_all_small_lengths():
  cases = list(itertools.product(range(13), range(13), range(3, 16)))
  a = tf.ragged.constant([[10 + i for i in range(la)] for la, _, _ in cases],
                         dtype=tf.int64, row_splits_dtype=tf.int64)
  b = tf.ragged.constant([[50 + i for i in range(lb)] for _, lb, _ in cases],
                         dtype=tf.int64, row_splits_dtype=tf.int64)
  for seq_length in range(3, 16):
    rows = [i for i, case in enumerate(cases) if case[2] == seq_length]
    out = packing.pack_inputs([tf.gather(a, rows), tf.gather(b, rows)],
                              seq_length, CLS, SEP, PAD)
    for k, i in enumerate(rows):
      la, lb, _ = cases[i]
      ids, mask, types = expected_packing(range(10, 10 + la), range(50, 50 + lb),
                                          seq_length)
      assert out[constants.INPUT_WORD_IDS][k].numpy().tolist() == ids, cases[i]
      assert out[constants.INPUT_MASK][k].numpy().tolist() == mask, cases[i]
      assert out[constants.INPUT_TYPE_IDS][k].numpy().tolist() == types, cases[i]


def test_truncated_lengths_ties_cut_segment_b_first():
  new_a, new_b = packing.truncated_lengths(
      tf.constant([4, 4, 5, 9, 2]), tf.constant([4, 5, 4, 1, 9]), budget=7)
  assert new_a.numpy().tolist() == [4, 4, 4, 6, 2]
  assert new_b.numpy().tolist() == [3, 3, 3, 1, 5]


@pytest.mark.parametrize("length_a, length_b, seq_length", [
    (15, 15, 32), (16, 16, 32), (20, 17, 32), (40, 40, 64), (100, 31, 64), (3, 3, 8)])
def test_odd_budget_with_both_segments_long_cuts_b_on_the_tie(length_a, length_b,
                                                                 seq_length):
  budget = seq_length - 3
  assert budget % 2 == 1 and min(length_a, length_b) > budget // 2
  tokens_a = list(range(10, 10 + length_a))
  tokens_b = list(range(500, 500 + length_b))
  out = packing.pack_inputs(
      [tf.constant([tokens_a], tf.int64), tf.constant([tokens_b], tf.int64)],
      seq_length, CLS, SEP, PAD)
  ids, mask, types = expected_packing(tokens_a, tokens_b, seq_length)
  assert out[constants.INPUT_WORD_IDS][0].numpy().tolist() == ids
  assert out[constants.INPUT_MASK][0].numpy().tolist() == mask
  assert out[constants.INPUT_TYPE_IDS][0].numpy().tolist() == types
  # A keeps one piece more than B: ceil(budget / 2) against floor(budget / 2).
  kept_a, kept_b = original_truncation(tokens_a, tokens_b, budget)
  assert (len(kept_a), len(kept_b)) == ((budget + 1) // 2, budget // 2)


def test_single_segment_is_truncated_from_the_end_and_padded():
  a = tf.ragged.constant([[1, 2, 3, 4, 5, 6], [7], []], dtype=tf.int64)
  out = packing.pack_inputs(a, 5, CLS, SEP, PAD)
  for k, tokens in enumerate([[1, 2, 3, 4, 5, 6], [7], []]):
    ids, mask, types = expected_packing(tokens, None, 5)
    assert out[constants.INPUT_WORD_IDS][k].numpy().tolist() == ids
    assert out[constants.INPUT_MASK][k].numpy().tolist() == mask
    assert out[constants.INPUT_TYPE_IDS][k].numpy().tolist() == types


def test_outputs_are_int32_with_static_seq_length_and_input_names():
  a = tf.ragged.constant([[1, 2]], dtype=tf.int64)
  out = tf.function(lambda x: packing.pack_inputs([x, x], 8, CLS, SEP, PAD))(a)
  assert set(out) == set(constants.ENCODER_INPUTS)
  for value in out.values():
    assert value.dtype == tf.int32 and value.shape.as_list() == [1, 8]


def test_words_axis_dense_and_unbatched_inputs_pack_the_same():
  words = tf.ragged.constant([[[1, 2], [3]], [[4], [5, 6, 7]]], dtype=tf.int64)
  pieces = words.merge_dims(1, 2)
  dense = pieces.to_tensor()[:1]  # [[1, 2, 3]]
  b = tf.ragged.constant([[8, 9], [10]], dtype=tf.int64)
  from_words = packing.pack_inputs([words, b], 7, CLS, SEP, PAD)
  from_pieces = packing.pack_inputs([pieces, b], 7, CLS, SEP, PAD)
  from_dense = packing.pack_inputs([dense, b[:1].to_tensor()], 7, CLS, SEP, PAD)
  single = packing.pack_inputs([tf.constant([1, 2, 3]), tf.constant([8, 9])], 7,
                               CLS, SEP, PAD)
  for key in constants.ENCODER_INPUTS:
    np.testing.assert_array_equal(from_words[key], from_pieces[key])
    np.testing.assert_array_equal(from_dense[key][0], from_pieces[key][0])
    np.testing.assert_array_equal(single[key], from_pieces[key][0])
  assert from_pieces[constants.INPUT_WORD_IDS].numpy().tolist() == [
      expected_packing([1, 2, 3], [8, 9], 7)[0],
      expected_packing([4, 5, 6, 7], [10], 7)[0]]


def test_batched_and_unbatched_tf_data_give_the_same_inputs():
  rng = np.random.default_rng(0)
  pairs = [(rng.integers(1000, 2000, rng.integers(0, 12)).tolist(),
            rng.integers(1000, 2000, rng.integers(0, 12)).tolist()) for _ in range(40)]
  packer = packing.BertPackInputs(seq_length=12, cls_id=CLS, sep_id=SEP, pad_id=PAD)
  dataset = tf.data.Dataset.from_generator(
      lambda: iter(pairs),
      output_signature=(tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.int64)))
  unbatched = dataset.map(lambda a, b: packer([a, b])).batch(8)
  batched = dataset.ragged_batch(8).map(lambda a, b: packer([a, b]))
  count = 0
  for one, many in zip(unbatched, batched):
    for key in constants.ENCODER_INPUTS:
      np.testing.assert_array_equal(one[key], many[key])
    count += int(one[constants.INPUT_MASK].shape[0])
  assert count == len(pairs)
  first = next(iter(batched))
  ids, mask, types = expected_packing(pairs[0][0], pairs[0][1], 12)
  assert first[constants.INPUT_WORD_IDS][0].numpy().tolist() == ids
  assert first[constants.INPUT_TYPE_IDS][0].numpy().tolist() == types


def test_seq_length_too_small_for_the_special_tokens_is_an_error():
  a = tf.ragged.constant([[1]], dtype=tf.int64)
  with pytest.raises(ValueError, match="seq_length=2"):
    packing.pack_inputs([a, a], 2, CLS, SEP, PAD)
  with pytest.raises(ValueError, match="1 or 2 segments"):
    packing.pack_inputs([a, a, a], 8, CLS, SEP, PAD)
  with pytest.raises(ValueError, match="seq_length must be >= 2"):
    packing.BertPackInputs(1, CLS, SEP)


def test_pack_module_takes_special_ids_from_the_tokenizer():

  class FakeTokenizer:
    cls_id, sep_id, pad_id = 7, 8, 9

  packer = packing.BertPackInputs.from_tokenizer(FakeTokenizer(), seq_length=5)
  assert packer.get_config() == dict(seq_length=5, cls_id=7, sep_id=8, pad_id=9)
  out = packer(tf.constant([1]))
  assert out[constants.INPUT_WORD_IDS].numpy().tolist() == [7, 1, 8, 9, 9]


def test_packing_graph_uses_only_allowlisted_ops():
  packer = packing.BertPackInputs(seq_length=16, cls_id=CLS, sep_id=SEP, pad_id=PAD)
  specs = [
      [tf.RaggedTensorSpec([None, None], tf.int64, 1, tf.int64)],
      [tf.RaggedTensorSpec([None, None], tf.int64, 1, tf.int64),
       tf.RaggedTensorSpec([None, None, None], tf.int64, 2, tf.int64)],
      [tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int32)],
      [tf.TensorSpec([None, None], tf.int32)],
  ]
  ops = set()
  for spec in specs:
    graph = tf.function(packer.__call__).get_concrete_function(spec).graph
    ops |= serving_ops.graph_op_types(graph.as_graph_def())
  assert ops <= serving_ops.PACKING_OP_ALLOWLIST, sorted(
      ops - serving_ops.PACKING_OP_ALLOWLIST)
  assert "GatherV2" in ops and "SelectV2" in ops
