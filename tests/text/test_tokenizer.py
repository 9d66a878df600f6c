"""Tests of BertWordPieceTokenizer against the Hugging Face reference tokenizer."""

import os
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text
from tokenizers import BertWordPieceTokenizer as HfBertWordPieceTokenizer

from bert_tf import constants
from bert_tf.text import normalization
from bert_tf.text import serving_ops
from bert_tf.text.tokenizer import BertWordPieceTokenizer
from tokenizer_fixtures import SUFFIXES, has_final_capital_sigma, make_vocab, read_lines


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def setting(request, tmp_path_factory):
  lower_case = request.param
  vocab_file = make_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt", lower_case)
  reference = HfBertWordPieceTokenizer(
      vocab_file, lowercase=lower_case, strip_accents=lower_case,
      clean_text=True, handle_chinese_chars=True, wordpieces_prefix="##")
  return lower_case, vocab_file, reference, BertWordPieceTokenizer(vocab_file, lower_case)


def reference_ids(reference, texts):
  return [e.ids for e in reference.encode_batch(texts, add_special_tokens=False)]


def test_ids_equal_hf_reference_on_fixture_text(setting):
  lower_case, _, reference, tokenizer = setting
  texts = read_lines("sentences.txt") + read_lines("corpus.txt") + ["", " \t\n "]
  if lower_case:
    texts = [t for t in texts if not has_final_capital_sigma(t)]
  ours = tokenizer.tokenize_pieces(tf.constant(texts)).to_list()
  expected = reference_ids(reference, texts)
  for text, o, e in zip(texts, ours, expected):
    assert o == e, text
  # The fixture is not trivially tokenized: pieces, unknowns and long words occur.
  flat = [i for row in ours for i in row]
  assert flat.count(tokenizer.unk_id) >= 10
  assert any(tokenizer.vocab[i] in SUFFIXES for i in flat)


def test_nfkc_sensitive_characters_keep_original_normalization(setting):
  lower_case, vocab_file, reference, tokenizer = setting
  texts = ["5 µm", "Straße", "the ﬁ ligature", "Acme™", "¾ cup", "Ｆｕｌｌ", "x² H₂O"]
  ours = tokenizer.tokenize_pieces(tf.constant(texts)).to_list()
  assert ours == reference_ids(reference, texts)
  if lower_case:
    # tensorflow-text's own lower-casing (NFKC case folding) gives other ids.
    folding = tf_text.BertTokenizer(vocab_file, lower_case=True)
    folded = folding.tokenize(tf.constant(texts)).merge_dims(1, 2).to_list()
    assert sum(a != b for a, b in zip(folded, ours)) >= 4


def test_final_sigma_follows_python_str_lower(setting):
  lower_case, _, _, tokenizer = setting
  text = "ΟΔΟΣ ΑΣ.Α ΑΣ, Σ ΣΑΣ"
  words = tokenizer.split_words(tf.constant([text])).to_list()[0]
  words = [w.decode() for w in words]
  if lower_case:
    expected = [w for token in text.split()
                for w in re.findall(r"\w+|[^\w\s]", token.lower())]
    assert expected == ["οδος", "ασ", ".", "α", "ας", ",", "σ", "σας"]
    assert words == expected
  else:
    assert words == ["ΟΔΟΣ", "ΑΣ", ".", "Α", "ΑΣ", ",", "Σ", "ΣΑΣ"]


def test_private_use_and_unassigned_characters_are_kept_like_the_original(setting):
  _, _, _, tokenizer = setting
  # The original removes only Cc/Cf; Hugging Face also drops Co (private use).
  words = tokenizer.split_words(tf.constant(["a\ue000b c"])).to_list()[0]
  assert [w.decode() for w in words] == ["a\ue000b", "c"]


def test_words_over_max_chars_become_unk_counting_characters(setting):
  lower_case, _, _, tokenizer = setting
  accented = "é" * 100  # 200 bytes, 100 characters.
  texts = ["a" * 100, "a" * 101, accented, "é" * 101]
  ids = tokenizer.tokenize(tf.constant(texts))
  pieces = [[tokenizer.vocab[i] for i in row] for row in ids.merge_dims(1, 2).to_list()]
  letter = "e" if lower_case else "é"
  assert pieces[0] == ["a"] + ["##a"] * 99
  assert pieces[1] == [constants.UNK_TOKEN]
  assert pieces[2] == [letter] + ["##" + letter] * 99
  assert pieces[3] == [constants.UNK_TOKEN]


def test_max_chars_per_word_is_configurable(setting):
  lower_case, vocab_file, _, _ = setting
  tokenizer = BertWordPieceTokenizer(vocab_file, lower_case, max_chars_per_word=200)
  ids = tokenizer.tokenize_pieces(tf.constant(["a" * 150, "a" * 201])).to_list()
  assert len(ids[0]) == 150 and ids[1] == [tokenizer.unk_id]


def test_unknown_word_is_a_single_unk(setting):
  _, _, _, tokenizer = setting
  ids = tokenizer.tokenize(tf.constant(["walk Привет walking"])).to_list()[0]
  assert ids[1] == [tokenizer.unk_id]
  assert ids[0] == [tokenizer.token_to_id("walk")]
  assert ids[2] == [tokenizer.token_to_id("walk"), tokenizer.token_to_id("##ing")]


def test_eager_tf_function_and_tf_data_give_the_same_ids(setting):
  _, _, _, tokenizer = setting
  texts = read_lines("sentences.txt")
  eager = tokenizer.tokenize(tf.constant(texts))
  traced = tf.function(tokenizer.tokenize)(tf.constant(texts))
  batched = tf.data.Dataset.from_tensor_slices(texts).batch(5).map(tokenizer.tokenize)
  from_batches = [row for batch in batched for row in batch.to_list()]
  unbatched = tf.data.Dataset.from_tensor_slices(texts).map(tokenizer.tokenize_pieces)
  from_examples = [row.numpy().tolist() for row in unbatched]
  assert traced.to_list() == eager.to_list()
  assert from_batches == eager.to_list()
  assert from_examples == eager.merge_dims(1, 2).to_list()


def test_scalar_input_gives_unbatched_results(setting):
  _, _, _, tokenizer = setting
  text = "The walker walked."
  batch = tokenizer.tokenize(tf.constant([text]))
  single = tokenizer.tokenize(tf.constant(text))
  ids, begin, end = tokenizer.tokenize_with_offsets(tf.constant(text))
  assert single.to_list() == batch.to_list()[0]
  assert ids.to_list() == single.to_list()
  assert begin.shape.rank == 2 and end.shape.rank == 2
  merged = [i for word in batch.to_list()[0] for i in word]
  assert tokenizer.tokenize_pieces(tf.constant(text)).numpy().tolist() == merged


def test_offsets_locate_each_piece_in_the_original_text(setting):
  lower_case, _, _, tokenizer = setting
  texts = read_lines("sentences.txt")
  ids, begin, end = tokenizer.tokenize_with_offsets(tf.constant(texts))
  assert ids.to_list() == tokenizer.tokenize(tf.constant(texts)).to_list()
  checked = 0
  for text, row_ids, row_begin, row_end in zip(
      texts, ids.to_list(), begin.to_list(), end.to_list()):
    raw = text.encode("utf-8")
    for word_ids, word_begin, word_end in zip(row_ids, row_begin, row_end):
      # Pieces of a word are in order and do not overlap (removed characters
      # such as U+200B may lie between them).
      assert all(b >= e for b, e in zip(word_begin[1:], word_end[:-1]))
      for i, b, e in zip(word_ids, word_begin, word_end):
        source = raw[b:e]
        normalized = normalization.normalize(tf.constant(source), lower_case).numpy()
        token = tokenizer.vocab[i]
        if i == tokenizer.unk_id:
          assert normalized.decode() == normalized.decode().strip() != ""
        else:
          assert normalized.decode() == token.removeprefix("##"), (text, token, source)
        checked += 1
  assert checked > 300


def test_offsets_span_removed_characters_inside_a_word(setting):
  lower_case, _, _, tokenizer = setting
  text = "xx walk\u200bing \u00e9t\u00e9"
  ids, begin, end = tokenizer.tokenize_with_offsets(tf.constant([text]))
  raw = text.encode("utf-8")
  spans = [raw[b:e].decode() for b, e in zip(begin.merge_dims(1, 2).to_list()[0],
                                              end.merge_dims(1, 2).to_list()[0])]
  pieces = [tokenizer.vocab[i] for i in ids.merge_dims(1, 2).to_list()[0]]
  assert pieces[:3] == ["x", "##x", "walk"]
  assert spans[:3] == ["x", "x", "walk"]
  # The zero-width space belongs to no piece: "##ing" starts after it.
  assert pieces[3] == "##ing" and spans[3] == "ing"
  assert "".join(spans[4:]) == "\u00e9t\u00e9"


def test_special_token_ids_are_looked_up_by_name(tmp_path):
  specials = ["[unused0]", "[MASK]", "[SEP]", "hello", "[PAD]", "[CLS]", "[UNK]"]
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(specials) + "\n", encoding="utf-8")
  tokenizer = BertWordPieceTokenizer(str(path), lower_case=True)
  assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id,
          tokenizer.mask_id) == (4, 6, 5, 2, 1)
  assert tokenizer.vocab_size == 7
  assert tokenizer.special_token_ids == {"[PAD]": 4, "[UNK]": 6, "[CLS]": 5,
                                         "[SEP]": 2, "[MASK]": 1}
  assert tokenizer.tokenize_pieces(tf.constant(["Hello world"])).to_list() == [[3, 6]]


def test_missing_special_token_is_an_error_naming_it(tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_text("[PAD]\n[UNK]\n[CLS]\nhello\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"\[SEP\], \[MASK\]") as error:
    BertWordPieceTokenizer(str(path), lower_case=True)
  assert str(path) in str(error.value)


def test_missing_vocab_file_is_an_error_naming_it(tmp_path):
  path = str(tmp_path / "nowhere" / "vocab.txt")
  with pytest.raises(FileNotFoundError, match="nowhere"):
    BertWordPieceTokenizer(path, lower_case=True)


def test_detokenize_round_trips_in_vocab_text(setting):
  _, _, _, tokenizer = setting
  texts = ["The walker walked, and the runner ran!", "Teachers painted (slowly) the garden."]
  ids = tokenizer.tokenize(tf.constant(texts))
  assert tokenizer.unk_id not in ids.flat_values.numpy()
  words = tokenizer.split_words(tf.constant(texts)).to_list()
  text = tokenizer.detokenize(ids).numpy().tolist()
  assert text == [b" ".join(w) for w in words]
  assert tokenizer.tokenize(tf.constant(text)).to_list() == ids.to_list()
  assert tokenizer.detokenize(ids.merge_dims(1, 2)).numpy().tolist() == text
  dense = ids.merge_dims(1, 2).to_tensor(default_value=tokenizer.pad_id)
  assert tokenizer.detokenize(dense).numpy().tolist() == text


def test_ids_to_tokens_maps_ids_and_out_of_range_to_unk(setting):
  _, _, _, tokenizer = setting
  tokens = tokenizer.ids_to_tokens(tf.constant([[tokenizer.cls_id, tokenizer.vocab_size + 5]]))
  assert tokens.numpy().tolist() == [[b"[CLS]", b"[UNK]"]]


@pytest.fixture(scope="module")
def fast_tokenizer(setting):
  lower_case, vocab_file, _, _ = setting
  return BertWordPieceTokenizer(vocab_file, lower_case, fast=True)


def test_fast_wordpiece_gives_identical_ids_and_offsets(setting, fast_tokenizer):
  tokenizer, fast = setting[3], fast_tokenizer
  texts = tf.constant(read_lines("sentences.txt") + read_lines("corpus.txt"))
  for ours, theirs in zip(tokenizer.tokenize_with_offsets(texts),
                          fast.tokenize_with_offsets(texts)):
    assert ours.to_list() == theirs.to_list()


def _traced_op_types(tokenizer):
  ops = set()
  for method in (tokenizer.tokenize, tokenizer.tokenize_pieces,
                 tokenizer.tokenize_with_offsets, tokenizer.split_words):
    for spec in (tf.TensorSpec([None], tf.string), tf.TensorSpec([], tf.string)):
      graph = tf.function(method).get_concrete_function(spec).graph
      ops |= serving_ops.graph_op_types(graph.as_graph_def())
  for spec in (tf.RaggedTensorSpec([None, None], tf.int64, 1, tf.int64),
               tf.RaggedTensorSpec([None, None, None], tf.int64, 2, tf.int64),
               tf.TensorSpec([None, None], tf.int32)):
    for method in (tokenizer.detokenize, tokenizer.ids_to_tokens):
      graph = tf.function(method).get_concrete_function(spec).graph
      ops |= serving_ops.graph_op_types(graph.as_graph_def())
  return ops


def test_tokenizer_graph_uses_only_allowlisted_ops(setting):
  _, _, _, tokenizer = setting
  ops = _traced_op_types(tokenizer)
  assert ops <= serving_ops.TOKENIZER_OP_ALLOWLIST, sorted(
      ops - serving_ops.TOKENIZER_OP_ALLOWLIST)
  assert {"WordpieceTokenizeWithOffsets", "RegexSplitWithOffsets"} <= ops
  if setting[0]:
    assert {"StringLower", "NormalizeUTF8"} <= ops


def test_fast_tokenizer_graph_is_not_allowlisted(fast_tokenizer):
  graph = tf.function(fast_tokenizer.tokenize).get_concrete_function(
      tf.TensorSpec([None], tf.string)).graph
  ops = serving_ops.graph_op_types(graph.as_graph_def())
  assert not ops <= serving_ops.TOKENIZER_OP_ALLOWLIST
  assert any(op.startswith("FastWordpiece") for op in ops)


class _Serving(tf.Module):

  def __init__(self, tokenizer):
    super().__init__()
    self.tokenizer = tokenizer

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def tokenize(self, text):
    ids, begin, end = self.tokenizer.tokenize_with_offsets(text)
    return {"ids": ids.merge_dims(1, 2).to_tensor(-1),
            "begin": begin.merge_dims(1, 2).to_tensor(-1),
            "end": end.merge_dims(1, 2).to_tensor(-1)}


def test_saved_model_keeps_ids_with_the_vocab_as_an_asset(tmp_path):
  copy = make_vocab(tmp_path / "vocab_copy.txt", lower_case=True)
  module = _Serving(BertWordPieceTokenizer(copy, lower_case=True))
  texts = tf.constant(read_lines("sentences.txt"))
  expected = module.tokenize(texts)
  export_dir = str(tmp_path / "saved_model")
  tf.saved_model.save(module, export_dir,
                      signatures={"serving_default": module.tokenize})
  os.remove(copy)  # The SavedModel must read its own copy.
  assert os.listdir(os.path.join(export_dir, "assets")) == ["vocab_copy.txt"]
  loaded = tf.saved_model.load(export_dir)
  got = loaded.signatures["serving_default"](text=texts)
  for key, value in expected.items():
    np.testing.assert_array_equal(got[key].numpy(), value.numpy())
  ops = serving_ops.saved_model_op_types(export_dir)
  # RaggedTensorToTensor comes from this test's own `to_tensor` calls.
  allowed = (serving_ops.TOKENIZER_OP_ALLOWLIST | serving_ops.SAVED_MODEL_INFRA_OPS
             | {"RaggedTensorToTensor"})
  assert ops <= allowed, sorted(ops - allowed)


def test_a_new_tokenizer_never_reads_an_earlier_tokenizers_vocab(tmp_path, monkeypatch):
  # TensorFlow names a table initialized from a file Asset after str(asset), by default
  # the Asset's memory address, and keeps the named table after its tokenizer is gone: a
  # later tokenizer whose Asset reused the address looked up in the earlier vocab. Every
  # Asset printing the same stands in for that reuse here, deterministically.
  monkeypatch.setattr(tf.saved_model.Asset, "__repr__", lambda self: "Asset")
  specials = list(constants.SPECIAL_TOKENS)
  large = tmp_path / "large.txt"
  large.write_text("\n".join(specials + [f"x{i}" for i in range(20)] + ["a", "b"]) + "\n",
                   encoding="utf-8")
  small = tmp_path / "small.txt"
  small.write_text("\n".join(specials + ["b", "a"]) + "\n", encoding="utf-8")
  for path in (large, small):
    tokenizer = BertWordPieceTokenizer(str(path), lower_case=True, fast=False)
    expected = [tokenizer.token_to_id("a"), tokenizer.token_to_id("b")]
    assert tokenizer.tokenize(tf.constant(["a b"])).flat_values.numpy().tolist() == expected
    assert tokenizer.ids_to_tokens(tf.constant(expected)).numpy().tolist() == [b"a", b"b"]
