"""The original google-research/bert word splitting in plain Python, as a reference.

BasicTokenizer's cleaning and word splitting (`original_words`), transcribed from its
description. The normalization tests (tests/text/test_normalization.py) compare the in-graph
splitting with them (the tokenizer-agreement benchmark, retired at 597169b, compared whole
tokenizers with them on real text); it imports nothing but the standard library.
"""

import unicodedata

# The CJK blocks the original pads with spaces (each ideograph becomes a word).
_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
               (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF),
               (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_punctuation(ch):
  """ASCII non-alphanumerics count as punctuation besides Unicode's P* categories."""
  cp = ord(ch)
  if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
    return True
  return unicodedata.category(ch).startswith("P")


def original_words(text, lower_case):
  """Words of the original BasicTokenizer for a Python str: a list of str."""
  spaced = []
  for ch in text:
    category = unicodedata.category(ch)
    if ch in "\x00\ufffd" or (ch not in "\t\n\r" and category in ("Cc", "Cf")):
      continue
    if ch in " \t\n\r" or category == "Zs":
      spaced.append(" ")
    elif any(lo <= ord(ch) <= hi for lo, hi in _CJK_RANGES):
      spaced.append(f" {ch} ")
    else:
      spaced.append(ch)
  words = []
  for token in "".join(spaced).split():
    if lower_case:
      token = "".join(c for c in unicodedata.normalize("NFD", token.lower())
                      if unicodedata.category(c) != "Mn")
    current = ""
    for ch in token:
      if _is_punctuation(ch):
        if current:
          words.append(current)
        words.append(ch)
        current = ""
      else:
        current += ch
    if current:
      words.append(current)
  return words

