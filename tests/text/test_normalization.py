"""Tests that the in-graph normalization and word splitting follow original BERT."""

import unicodedata

import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from reference_tokenizer import original_words
from bert_tf.text import normalization


def stable_code_points():
  """Characters assigned since Unicode 3.2, in the BMP and the SIP.

  Newer characters are left out: Python's `unicodedata`, ICU and RE2 each
  carry their own Unicode version, and they disagree only on recent additions.
  """
  old = unicodedata.ucd_3_2_0
  return [cp for cp in range(0x30000)
          if old.category(chr(cp)) not in ("Cn", "Cs", "Co")]


def _decoded(ragged):
  return [[w.decode("utf-8") for w in row] for row in ragged.to_list()]


@pytest.fixture(scope="module")
def every_character_texts():
  chars = [chr(cp) for cp in stable_code_points()]
  # Each character in several contexts: inside, before and after a word, doubled,
  # and after a capital sigma (whose lower case depends on what follows).
  per_row = 200
  return ["".join(f"a{c}b A{c} {c}Z x{c}{c} ΑΣ{c} " for c in chars[i:i + per_row])
          for i in range(0, len(chars), per_row)]


@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased", "cased"])
def test_words_match_original_rules_for_every_character(every_character_texts, lower_case):
  ours = _decoded(normalization.split_words(tf.constant(every_character_texts), lower_case))
  for text, words in zip(every_character_texts, ours):
    expected = original_words(text, lower_case)
    if words != expected:
      first = next(i for i, (a, b) in enumerate(zip(words, expected)) if a != b)
      pytest.fail(f"{words[first - 2:first + 3]} != {expected[first - 2:first + 3]}")


@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased", "cased"])
def test_fast_split_equals_split_with_offsets(every_character_texts, lower_case):
  normalized = normalization.normalize(tf.constant(every_character_texts), lower_case)
  fast = normalization.split_normalized_words(normalized)
  words, begin, end = normalization.split_words_with_offsets(normalized)
  assert fast.to_list() == words.to_list()
  # The offsets cut exactly the words out of the normalized text.
  for text, row, row_begin, row_end in zip(
      normalized.numpy(), words.to_list(), begin.to_list(), end.to_list()):
    assert [text[b:e] for b, e in zip(row_begin, row_end)] == row


@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased", "cased"])
def test_normalized_length_is_the_sum_over_characters(every_character_texts, lower_case):
  # source_offsets_mapper relies on normalization working character by character.
  texts = tf.constant(every_character_texts)
  whole = tf.strings.length(normalization.normalize(texts, lower_case))
  chars = tf.strings.unicode_split(texts, "UTF-8")
  per_char = tf.reduce_sum(
      tf.strings.length(normalization.normalize(chars, lower_case)), axis=1)
  assert whole.numpy().tolist() == per_char.numpy().tolist()


LOWER_CASE_EDGE_CASES = [
    "İstanbul", "ΟΔΟΣ", "ΑΣ.Α", "ΑΣ, ΣΑΣ", "Σ", "ẞ", "ǅ ǈ ǋ", "\u212a \u2126 \u212b",
    "ÀÉÎÕÜ Çà", "ΆΈΉΊΌΎΏ", "ДЖ Ёж", "ԱԲ Ⴀ", "Ꭰ", "ﬃ ß µ ™",
]


@pytest.mark.parametrize("text", LOWER_CASE_EDGE_CASES)
def test_lower_case_matches_python_str_lower(text):
  ours = tf.strings.lower(tf.constant(text), encoding="utf-8").numpy().decode()
  assert ours == text.lower()


@pytest.mark.parametrize("text", LOWER_CASE_EDGE_CASES)
def test_uncased_normalization_equals_lower_nfd_strip_mn(text):
  ours = normalization.normalize(tf.constant(text), lower_case=True).numpy().decode()
  expected = "".join(c for c in unicodedata.normalize("NFD", text.lower())
                     if unicodedata.category(c) != "Mn")
  assert ours == expected


def test_nfkc_compatibility_characters_are_not_folded():
  text = "µ ß ﬁ ™ ¾ ″ ｆ ²"
  ours = normalization.normalize(tf.constant(text), lower_case=True).numpy().decode()
  folded = tf_text.case_fold_utf8(tf.constant(text)).numpy().decode()
  assert ours == text
  assert folded == "μ ss fi tm 3⁄4 ′′ f 2"


def test_accents_are_stripped_only_when_uncased():
  text = "Café naïve Ångström e\u0301"
  uncased = normalization.normalize(tf.constant(text), lower_case=True).numpy().decode()
  cased = normalization.normalize(tf.constant(text), lower_case=False).numpy().decode()
  assert uncased == "cafe naive angstrom e"
  assert cased == text


def test_clean_text_removes_controls_and_maps_whitespace_to_space():
  text = ("a\x00b\ufffdc\x07d\u200be\ufeff\u00adf\x0bg\x85h\x7fi"
          "|\t|\n|\r|\u00a0|\u3000|\u2028|\u2029|\u2003|")
  cleaned = normalization.clean_text(tf.constant(text)).numpy().decode()
  assert cleaned == "abcdefghi" + "| " * 8 + "|"


def test_invalid_utf8_is_dropped():
  raw = b"caf\xc3 ok \xff\xfegood \xe2\x82"
  cleaned = normalization.clean_text(tf.constant(raw)).numpy()
  assert cleaned == raw.decode("utf-8", "ignore").encode("utf-8")
  words = normalization.split_words(tf.constant([raw]), lower_case=True).to_list()
  assert words == [[b"caf", b"ok", b"good"]]


def test_split_keeps_punctuation_and_cjk_as_single_words():
  text = "Hello,world! (x) a.b «q» 中文字 $5 ^_^ 한국어 ひらがな"
  words = _decoded(normalization.split_words(tf.constant([text]), lower_case=False))[0]
  assert words == ["Hello", ",", "world", "!", "(", "x", ")", "a", ".", "b", "«", "q",
                   "»", "中", "文", "字", "$", "5", "^", "_", "^", "한국어", "ひらがな"]


def test_every_cjk_block_of_the_original_is_split_including_extension_e_start():
  # Hugging Face's CJK ranges begin Extension E at U+2B920, the original at U+2B820;
  # the every-character test above leaves these (post-3.2) characters out.
  ideographs = ["\U0002B820", "\U0002B91F", "\U0002B920", "\U0002CEAF", "\U0002A700",
                "\U00020000", "\u3400", "\uF900", "\U0002F800"]
  text = " ".join(f"a{c}b" for c in ideographs)
  for lower_case in (True, False):
    words = _decoded(normalization.split_words(tf.constant([text]), lower_case))[0]
    # Each ideograph is a word of its own (compatibility ideographs decompose under NFD).
    assert len(words) == 3 * len(ideographs) and words[:3] == ["a", "\U0002B820", "b"]
    assert words == original_words(text, lower_case)


def test_source_offsets_cover_whole_characters():
  text = "Ça\u200b va, \u00c9T\u00c9 \u0130i"
  normalized = normalization.normalize(tf.constant([text]), lower_case=True)
  words, begin, end = normalization.split_words_with_offsets(normalized)
  to_source = normalization.source_offsets_mapper(tf.constant([text]), lower_case=True)
  source_begin, source_end = to_source(
      tf.zeros_like(begin.flat_values), begin.flat_values, end.flat_values)
  raw = text.encode("utf-8")
  spans = [raw[b:e].decode() for b, e in zip(source_begin.numpy(), source_end.numpy())]
  assert [w.decode() for w in words.flat_values.numpy()] == ["ca", "va", ",", "ete", "ii"]
  assert spans == ["Ça", "va", ",", "\u00c9T\u00c9", "\u0130i"]


def test_reference_rules_give_the_known_words():
  assert original_words("Héllo, 中文 world!", True) == ["hello", ",", "中", "文", "world", "!"]


def test_whitespace_split_is_python_str_split_with_byte_spans():
  # Every character up to U+3100 between two words, and runs of mixed whitespace.
  texts = [f"a{chr(c)}b" for c in range(1, 0x3100) if not 0xD800 <= c < 0xE000]
  texts += ["  John\u3000lives\t\u00a0in  Paris  ", "", " \n ", "café\u2028x"]
  words, begin, end = normalization.split_whitespace_with_offsets(tf.constant(texts))
  for text, row, b, e in zip(texts, words.to_list(), begin.to_list(), end.to_list()):
    data = text.encode("utf-8")
    assert [w.decode("utf-8") for w in row] == text.split()
    assert [data[i:j] for i, j in zip(b, e)] == row
