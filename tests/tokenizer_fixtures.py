"""The fixture texts and vocabs that the tokenizer tests share: a vocab learned from
the fixture corpus, cased or uncased, with the Hugging Face reference's word splitting."""

import collections
import pathlib
import re

from tokenizers import normalizers
from tokenizers import pre_tokenizers

from bert_tf import constants
import paths

TEXT_DIR = pathlib.Path(paths.TESTDATA) / "text"
SUFFIXES = ["##ing", "##ed", "##er", "##s", "##ly", "##ers", "##ion"]
STEMS = ["walk", "run", "swim", "teach", "paint", "play", "fish", "garden"]


def read_lines(name):
  # "\n" only: the fixture holds U+2028/U+2029, which str.splitlines() splits.
  text = (TEXT_DIR / name).read_text(encoding="utf-8")
  return [line for line in text.split("\n") if line]


def reference_words(text, lower_case):
  normalizer = normalizers.BertNormalizer(
      clean_text=True, handle_chinese_chars=True, strip_accents=lower_case,
      lowercase=lower_case)
  normalized = normalizer.normalize_str(text)
  return [w for w, _ in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(normalized)]


def make_vocab(path, lower_case, specials=constants.SPECIAL_TOKENS):
  """A vocab from the fixture corpus: characters, frequent words, some pieces."""
  counts = collections.Counter()
  for line in read_lines("corpus.txt"):
    counts.update(reference_words(line, lower_case))
  chars = sorted({c for word in counts for c in word})
  words = sorted(w for w, n in counts.items() if n >= 2 and len(w) > 1)
  tokens = list(specials) + ["[unused0]"]
  for token in chars + ["##" + c for c in chars] + words + STEMS + SUFFIXES:
    if token not in tokens:
      tokens.append(token)
  path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
  return str(path)


def has_final_capital_sigma(text):
  # Python's str.lower() (and the original BERT) writes a word-final capital
  # sigma as "ς"; Hugging Face lower-cases it to "σ" everywhere.
  return re.search(r"\wΣ(?!\w)", text) is not None
