"""In-graph text encoding of the serving signatures."""

import numpy as np
import tensorflow as tf

import export_helpers as helpers
from bert_tf import constants
from bert_tf.export import text_encoding
from bert_tf.text.tokenizer import BertWordPieceTokenizer


def _encoder(tmp_path, seq_length=8):
  return text_encoding.TextEncoder(
      BertWordPieceTokenizer(helpers.write_vocab(tmp_path), lower_case=True), seq_length)


def _id(encoder, token):
  return encoder.tokenizer.token_to_id(token)


def test_encode_packs_cls_text_sep_and_pads_to_seq_length(tmp_path):
  encoder = _encoder(tmp_path)
  out = encoder.encode(tf.constant(["the cat", ""]))
  cls, sep, pad = encoder.cls_id, encoder.sep_id, encoder.pad_id
  np.testing.assert_array_equal(out[constants.INPUT_WORD_IDS], [
      [cls, _id(encoder, "the"), _id(encoder, "cat"), sep, pad, pad, pad, pad],
      [cls, sep, pad, pad, pad, pad, pad, pad]])
  np.testing.assert_array_equal(out[constants.INPUT_MASK], [[1, 1, 1, 1, 0, 0, 0, 0],
                                                            [1, 1, 0, 0, 0, 0, 0, 0]])
  assert out[constants.INPUT_WORD_IDS].dtype == tf.int32


def test_encode_truncates_long_and_invalid_utf8_text_without_error(tmp_path):
  encoder = _encoder(tmp_path)
  out = encoder.encode(tf.constant(helpers.BAD_TEXTS))
  assert out[constants.INPUT_WORD_IDS].shape == (len(helpers.BAD_TEXTS), 8)
  np.testing.assert_array_equal(out[constants.INPUT_MASK][2], np.ones(8))
  assert out[constants.INPUT_WORD_IDS][2, -1] == encoder.sep_id


def test_pair_types_are_zero_then_one(tmp_path):
  encoder = _encoder(tmp_path)
  out = encoder.encode(tf.constant(["the cat"]), tf.constant(["a dog"]))
  np.testing.assert_array_equal(out[constants.INPUT_TYPE_IDS], [[0, 0, 0, 0, 1, 1, 1, 0]])


def test_char_offsets_count_characters_not_bytes():
  text = tf.constant(["héllo wörld", "abc"])
  offsets = text_encoding.char_offsets(text, tf.constant([7, 3]))
  np.testing.assert_array_equal(offsets, [6, 3])
