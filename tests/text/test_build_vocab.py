"""bert_tf.text.vocab_learning.build_vocab on a tiny corpus: special tokens first, the
requested size, and a vocab the tokenizer reads the corpus back with."""

import io

import numpy as np
import tensorflow as tf

from bert_tf import constants
from bert_tf.text import vocab_learning
from bert_tf.text.tokenizer import BertWordPieceTokenizer

WORDS = ("the", "cat", "sat", "on", "mat", "dog", "runs", "home", "quickly", "green",
         "table", "walking", "talked", "river", "mountain", "sunny", "window", "paper")
VOCAB_SIZE = 60  # Below the 67 tokens this corpus supports, so the size binds.


def _corpus(tmp_path):
  rng = np.random.default_rng(0)
  lines = [" ".join(rng.choice(WORDS, size=rng.integers(3, 9))) for _ in range(300)]
  path = tmp_path / "corpus.txt"
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return str(path), lines


def test_built_vocab_starts_with_special_tokens_fits_the_size_and_tokenizes_the_corpus(
    tmp_path):
  corpus, lines = _corpus(tmp_path)
  output = tmp_path / "vocab.txt"
  tokens = vocab_learning.build_vocab(corpus, VOCAB_SIZE, lower_case=True,
                                      output_file=str(output), progress_interval=None)
  assert output.read_text(encoding="utf-8").splitlines() == tokens
  assert tuple(tokens[:5]) == constants.SPECIAL_TOKENS == (
      "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
  assert len(set(tokens)) == len(tokens)
  assert 0.9 * VOCAB_SIZE <= len(tokens) <= VOCAB_SIZE
  tokenizer = BertWordPieceTokenizer(str(output), lower_case=True)
  ids = tokenizer.tokenize_pieces(tf.constant(lines))
  assert tokenizer.unk_id not in set(ids.flat_values.numpy().tolist())
  # Every word of the corpus is frequent, so each is one piece (or a few) of the vocab.
  text = [t.decode("utf-8") for t in tokenizer.detokenize(ids).numpy()]
  assert text == lines


def _rare_corpus(tmp_path):
  """Words of 2-5 letters in random order, each piece seen a few times only."""
  rng = np.random.default_rng(1)
  letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
  words = ["".join(rng.choice(letters, size=rng.integers(2, 6))) for _ in range(2000)]
  path = tmp_path / "rare.txt"
  path.write_text("\n".join(" ".join(words[i:i + 10]) for i in range(0, 2000, 10)) + "\n",
                  encoding="utf-8")
  return str(path)


def test_a_vocab_smaller_than_asked_says_so_with_both_sizes_and_min_count_gets_closer(
    tmp_path):
  corpus = _rare_corpus(tmp_path)
  out = io.StringIO()
  default = vocab_learning.build_vocab(corpus, 2000, lower_case=True,
                                       progress_interval=None, stream=out)
  line, = out.getvalue().splitlines()
  assert line.startswith(f"learned {len(default)} tokens (target 2000)")
  assert "Fewer tokens than the 2000 asked" in line and "--min_count (e.g. 2)" in line
  lower = vocab_learning.build_vocab(corpus, 2000, lower_case=True,
                                     progress_interval=None, min_count=2,
                                     stream=io.StringIO())
  assert len(default) < len(lower) <= 2000


def test_a_vocab_of_about_the_asked_size_adds_no_note(tmp_path):
  corpus, _ = _corpus(tmp_path)
  out = io.StringIO()
  vocab_learning.build_vocab(corpus, VOCAB_SIZE, lower_case=True, progress_interval=None,
                             stream=out)
  assert "Fewer tokens" not in out.getvalue()
