"""The tokenizer of the TensorFlow-free route (Hugging Face `tokenizers`) gives tf-text's
ids, and its NumPy packer the in-graph packer's inputs, on the fixture texts, cased and
uncased, pairs cut by the original truncation rule and literal [MASK]s included."""

import itertools
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import constants
from bert_tf.export import text_encoding
from bert_tf.text import host_tokenizer
from bert_tf.text.tokenizer import BertWordPieceTokenizer
from bert_tf.utils import errors
from tokenizer_fixtures import has_final_capital_sigma, make_vocab, read_lines


@pytest.fixture(name="setting", scope="module", params=[True, False],
                ids=["uncased", "cased"])
def fixture_setting(request, tmp_path_factory):
  lower_case = request.param
  vocab_file = make_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt", lower_case)
  return (lower_case, BertWordPieceTokenizer(vocab_file, lower_case),
          host_tokenizer.HostTokenizer(vocab_file, lower_case))


def fixture_texts(lower_case):
  texts = read_lines("sentences.txt") + read_lines("corpus.txt") + ["", " \t\n "]
  # The one difference on these texts (bert_tf.text.host_tokenizer's docstring).
  return [t for t in texts if not (lower_case and has_final_capital_sigma(t))]


def test_pieces_equal_tf_text_on_fixture_text(setting):
  lower_case, tf_tokenizer, host = setting
  texts = fixture_texts(lower_case)
  expected = tf_tokenizer.tokenize_pieces(tf.constant(texts)).to_list()
  got = host.pieces(texts)
  assert len(texts) > 50
  for text, g, e in zip(texts, got, expected):
    assert g == e, text
  assert sum(row.count(tf_tokenizer.unk_id) for row in got) >= 10


def test_pairs_pack_as_the_in_graph_packer_cuts_them(setting):
  lower_case, tf_tokenizer, host = setting
  # Segments of every length from 0 to 7 words against each other: ties, one segment
  # longer than the budget, both over it.
  words = ["walk", "the", "paint", "ran", "garden", "fish", "play"]
  texts = [" ".join(words[:n]) for n in range(8)]
  pairs = list(itertools.product(texts, texts))
  a, b = [p[0] for p in pairs], [p[1] for p in pairs]
  for seq_length in (3, 8, 9, 20):
    encoder = text_encoding.TextEncoder(tf_tokenizer, seq_length)
    expected, expected_cut = encoder.encode_with_truncation(tf.constant(a), tf.constant(b))
    got, cut = host.encode(a, b, seq_length)
    for name in constants.ENCODER_INPUTS:
      np.testing.assert_array_equal(got[name], expected[name].numpy(), err_msg=name)
    np.testing.assert_array_equal(cut, expected_cut.numpy())
  assert cut.max() > 0


def test_single_texts_with_mask_marks_pack_as_the_fill_mask_export_reads_them(setting):
  lower_case, tf_tokenizer, host = setting
  texts = [t.replace(" the ", " [MASK] ") for t in fixture_texts(lower_case)[:40]]
  texts += ["[MASK]", "a [MASK][MASK] b", "x[MASK]y", "", "[CLS] [SEP] [PAD] [UNK] [mask]"]
  encoder = text_encoding.TextEncoder(tf_tokenizer, 32)
  expected = encoder.encode_with_masks(tf.constant(texts))
  got, _ = host.encode(texts, seq_length=32)
  for name in constants.ENCODER_INPUTS:
    np.testing.assert_array_equal(got[name], expected[name].numpy(), err_msg=name)
  assert (got[constants.INPUT_WORD_IDS] == host.mask_id).sum() >= 20


def test_truncated_lengths_follow_the_original_rule():
  # Dropping the last piece of the longer segment, of B on a tie, one at a time.
  for length_a, length_b, budget in itertools.product(range(9), range(9), range(12)):
    a, b = length_a, length_b
    while a + b > budget:
      if a > b:
        a -= 1
      else:
        b -= 1
    assert host_tokenizer.truncated_lengths(length_a, length_b, budget) == (a, b)


def test_a_missing_tokenizers_library_is_one_line_naming_the_install(monkeypatch, tmp_path):
  vocab = make_vocab(tmp_path / "vocab.txt", True)
  monkeypatch.setitem(sys.modules, "tokenizers", None)
  host_tokenizer.optional.module.cache_clear()
  try:
    with pytest.raises(errors.InputError, match=r"^Tokenizing without TensorFlow needs "
                       r"tokenizers: pip install .*jax"):
      host_tokenizer.HostTokenizer(vocab, True)
  finally:
    host_tokenizer.optional.module.cache_clear()
