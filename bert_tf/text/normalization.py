"""In-graph text normalization and word splitting of the original BERT tokenizer.

The original google-research/bert `BasicTokenizer` cleans the text (drops
U+0000, U+FFFD and control characters of categories Cc/Cf except tab, newline
and carriage return; turns those three and every Zs space into " "), optionally
lower-cases with Python's `str.lower()`, decomposes with NFD and drops the
combining marks (category Mn), and then splits on whitespace, on punctuation
and around CJK ideographs. This module does the same with TensorFlow and
tensorflow-text ops that TF Serving can run:

* `tf.strings.lower(encoding="utf-8")` applies ICU's full lower-case mapping,
  which agrees with Python's `str.lower()`, including the context-dependent
  final sigma ("ΟΔΟΣ" -> "οδος") and "İ" -> "i̇". It is *not* tensorflow-text's
  `case_fold_utf8`, which also applies NFKC ("µ"->"μ", "ß"->"ss", "ﬁ"->"fi",
  "™"->"tm", "¾"->"3⁄4").
* `normalize_utf8(..., "NFD")` followed by removal of `\\p{Mn}` strips accents.
* `regex_split_with_offsets` splits words; whitespace is dropped, punctuation
  and CJK characters are kept as words of their own.

All functions take `tf.string` tensors of any shape (rank 0 or 1 for the
splitting functions) and run eagerly, inside `tf.function` and in `tf.data`.
"""

import tensorflow as tf
import tensorflow_text as tf_text

# Cc minus tab/newline/carriage return, every Cf, and U+FFFD: removed outright.
# U+0000 is in Cc. The explicit Cc ranges avoid a class subtraction RE2 lacks.
REMOVED_CHARS_PATTERN = r"[\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F\p{Cf}\x{FFFD}]"

# Tab, newline, carriage return, every Zs space and the line/paragraph
# separators U+2028/U+2029 become one " " each. The original keeps U+2028/U+2029
# but always splits words there, as at " ", so the words are the same. " "
# itself is left out of the class only because replacing it is slow.
SPACE_CHARS_PATTERN = r"[\t\n\r\x{2028}\x{2029}]|[^\P{Zs} ]"

# Combining marks dropped after NFD when accents are stripped.
COMBINING_MARKS_PATTERN = r"\p{Mn}"

# BERT's punctuation: every non-alphanumeric printable ASCII character and
# every Unicode P* character; and the original tokenizer's CJK ideograph
# blocks. Each such character is a word of its own.
_PUNCTUATION_CLASS = r"!-/:-@\[-`{-~\p{P}"
_CJK_CLASS = (
    r"\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}"
    r"\x{2A700}-\x{2B73F}\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}"
    r"\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}")
SINGLE_CHAR_WORD_PATTERN = f"[{_PUNCTUATION_CLASS}{_CJK_CLASS}]"

# After cleaning, " " is the only whitespace left (RE2's `\s` would be
# ASCII-only anyway).
SPLIT_PATTERN = f" +|{SINGLE_CHAR_WORD_PATTERN}"
KEEP_PATTERN = SINGLE_CHAR_WORD_PATTERN

# Every character of Python's str.isspace(), on which str.split() splits: how CoNLL
# files and other pre-tokenized text separate their words.
WHITESPACE_PATTERN = (r"[\t-\r\x{1C}-\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}"
                      r"\x{2029}\x{202F}\x{205F}\x{3000}]+")


def clean_text(text):
  """Drops invalid and control characters and maps whitespace to " ".

  Args:
    text: `tf.string` tensor of any shape, UTF-8. Invalid UTF-8 sequences are
      dropped, as the original tokenizer's `decode("utf-8", "ignore")` does.

  Returns:
    `tf.string` tensor of the same shape.
  """
  text = tf.strings.unicode_transcode(
      text, input_encoding="UTF-8", output_encoding="UTF-8", errors="replace",
      replacement_char=0xFFFD)
  text = tf.strings.regex_replace(text, REMOVED_CHARS_PATTERN, "")
  return tf.strings.regex_replace(text, SPACE_CHARS_PATTERN, " ")


def lower_case_and_strip_accents(text):
  """Python `str.lower()`, then NFD, then removal of combining marks (Mn).

  Args:
    text: `tf.string` tensor of any shape, UTF-8.

  Returns:
    `tf.string` tensor of the same shape.
  """
  text = tf.strings.lower(text, encoding="utf-8")
  text = tf_text.normalize_utf8(text, "NFD")
  return tf.strings.regex_replace(text, COMBINING_MARKS_PATTERN, "")


def normalize(text, lower_case):
  """Applies the original BERT text normalization.

  Args:
    text: `tf.string` tensor of any shape, UTF-8.
    lower_case: Python bool. True for uncased models (clean, lower-case, strip
      accents); False for cased models (clean only).

  Returns:
    `tf.string` tensor of the same shape: the text the word splitter sees.
  """
  text = clean_text(text)
  if lower_case:
    text = lower_case_and_strip_accents(text)
  return text


def split_words_with_offsets(normalized):
  """Splits normalized text into words, punctuation and CJK characters.

  Args:
    normalized: `tf.string` tensor of shape [B] (or a scalar), the output of
      `normalize`.

  Returns:
    A tuple `(words, begin, end)`: `words` is a `tf.RaggedTensor` of `tf.string`
    with shape [B, (words)] (or [(words)] for a scalar); `begin` and `end` are
    `tf.int64` with the same shape, the byte span of each word in `normalized`
    (end exclusive).
  """
  return tf_text.regex_split_with_offsets(
      normalized, SPLIT_PATTERN, KEEP_PATTERN)


def split_whitespace_with_offsets(text):
  """Splits raw text into its whitespace-separated words, as Python's str.split().

  Args:
    text: `tf.string` [B] (or a scalar), UTF-8.

  Returns:
    `(words, begin, end)`: `tf.string` ragged [B, (words)] (or [(words)]) and the
    `tf.int64` byte span of each word in `text` (end exclusive).
  """
  return tf_text.regex_split_with_offsets(text, WHITESPACE_PATTERN)


def split_normalized_words(normalized):
  """`split_words_with_offsets` without the offsets, about twice as fast.

  Args:
    normalized: `tf.string` tensor of shape [B] (or a scalar), the output of
      `normalize`.

  Returns:
    `tf.RaggedTensor` of `tf.string`, shape [B, (words)] (or a `tf.Tensor` of
    shape [words] for a scalar).
  """
  spaced = tf.strings.regex_replace(
      normalized, f"({SINGLE_CHAR_WORD_PATTERN})", r" \1 ")
  # With no separator, empty words between repeated spaces are not produced.
  return tf.strings.split(spaced)


def split_words(text, lower_case):
  """Normalizes raw text and splits it into words (the BERT basic tokenizer).

  Args:
    text: `tf.string` tensor of shape [B] (or a scalar) of raw UTF-8 text.
    lower_case: Python bool, as in `normalize`.

  Returns:
    `tf.RaggedTensor` of `tf.string` with shape [B, (words)] (or a `tf.Tensor`
    of shape [words] for a scalar).
  """
  return split_normalized_words(normalize(text, lower_case))


# ASCII characters that normalization removes (the rest keep their one byte).
_REMOVED_ASCII = tuple(range(0x00, 0x09)) + (0x0B, 0x0C) + tuple(
    range(0x0E, 0x20)) + (0x7F,)


def source_offsets_mapper(text, lower_case):
  """Returns a function mapping byte offsets in `normalize(text)` to `text`.

  Every step of the normalization works character by character (the only
  context-dependent rule, the final sigma, maps "Σ" to "σ" or "ς", both two
  bytes long), so the byte length of each normalized source character tells
  where its output lies in the normalized text.

  Args:
    text: `tf.string` tensor of shape [B] of raw UTF-8 text.
    lower_case: Python bool, as in `normalize`.

  Returns:
    A function `(row, begin, end) -> (source_begin, source_end)`, all `tf.int64`
    tensors of shape [N]: `row` is the batch index of each span, `[begin, end)`
    a non-empty byte span in the row's normalized text, and the result the
    smallest byte span of whole characters of `text[row]` that produced it.
  """
  codepoints, char_begin = tf.strings.unicode_decode_with_offsets(
      text, "UTF-8", errors="replace", replacement_char=0xFFFD)
  flat_codepoints = codepoints.flat_values
  flat_begin = tf.cast(char_begin.flat_values, tf.int64)
  splits = tf.cast(codepoints.row_splits, tf.int64)
  char_row = tf.cast(codepoints.value_rowids(), tf.int64)
  num_chars = tf.shape(flat_begin, out_type=tf.int64)[0]
  # Each source character ends where the next begins (or at the end of the
  # text), which also covers invalid bytes replaced by U+FFFD.
  row_ends = tf.cast(tf.strings.length(text), tf.int64)
  next_begin = tf.concat([flat_begin[1:], tf.zeros([1], tf.int64)], axis=0)
  is_last = tf.range(1, num_chars + 1) == tf.gather(splits, char_row + 1)
  flat_end = tf.where(
      is_last, tf.gather(row_ends, char_row), next_begin[:num_chars])

  # ASCII characters normalize to themselves or vanish; only the others go
  # through the string ops, one character at a time.
  is_ascii = flat_codepoints < 0x80
  ascii_removed = tf.reduce_any(
      tf.expand_dims(flat_codepoints, 1) == tf.constant([_REMOVED_ASCII]),
      axis=1)
  ascii_length = tf.where(ascii_removed, tf.constant(0, tf.int64),
                          tf.constant(1, tf.int64))
  other_index = tf.where(tf.logical_not(is_ascii))
  other_chars = tf.strings.unicode_encode(
      tf.expand_dims(tf.gather_nd(flat_codepoints, other_index), 1), "UTF-8")
  other_length = tf.cast(
      tf.strings.length(normalize(other_chars, lower_case)), tf.int64)
  normalized_length = tf.where(
      is_ascii, ascii_length,
      tf.scatter_nd(other_index, other_length, tf.expand_dims(num_chars, 0)))

  # Row r's normalized text occupies [row_start[r], row_start[r+1]) of the
  # concatenation of all rows; cumulative_end[k] is where character k ends.
  cumulative_end = tf.cumsum(normalized_length)
  row_start = tf.concat([tf.zeros([1], tf.int64), cumulative_end], axis=0)
  row_start = tf.gather(row_start, splits[:-1])
  last_char = tf.maximum(num_chars - 1, 0)

  def char_at(row, position):
    global_position = tf.gather(row_start, row) + position
    index = tf.searchsorted(
        cumulative_end, global_position, side="right", out_type=tf.int64)
    return tf.minimum(index, last_char)

  def to_source(row, begin, end):
    row = tf.cast(row, tf.int64)
    first = char_at(row, tf.cast(begin, tf.int64))
    last = char_at(row, tf.cast(end, tf.int64) - 1)
    return tf.gather(flat_begin, first), tf.gather(flat_end, last)

  return to_source
