"""bert_tf.text.vocab_learning.build_vocab on a tiny corpus: special tokens first, the
requested size, and a vocab the tokenizer reads the corpus back with."""

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
