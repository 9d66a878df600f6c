"""CoNLL reader and the first-WordPiece label alignment of tagging features."""

import pytest

import finetuning_helpers as helpers
from bert_tf import constants
from bert_tf.data.task_files import conll
from bert_tf.data.pipelines import featurizers
from bert_tf.data.pipelines.loaders import tagging
from bert_tf.data.task_files.glue import GlueFormatError

IOB1 = """-DOCSTART- -X- O O

ACME NNP I-NP I-ORG
drops VBZ I-VP O
Danish JJ I-NP I-MISC

Maria NNP I-NP I-PER
Lindqvist NNP I-NP I-PER
-DOCSTART- -X- O O

OSLO NNP I-NP I-LOC
"""


def _write(tmp_path, name, text):
  path = tmp_path / name
  path.write_text(text, encoding="utf-8")
  return str(path)


def test_sentences_split_at_blank_and_docstart_lines_with_last_column_tags(tmp_path):
  examples = conll.read_conll(_write(tmp_path, "eng.train", IOB1))
  assert [e.words for e in examples] == [["ACME", "drops", "Danish"], ["Maria", "Lindqvist"],
                                         ["OSLO"]]
  assert examples[0].tags == ["I-ORG", "O", "I-MISC"]
  assert [e.index for e in examples] == [0, 1, 2]


def test_word_only_file_reads_unlabelled(tmp_path):
  [example] = conll.read_conll(_write(tmp_path, "test.txt", "John\nlives\n"))
  assert example.words == ["John", "lives"] and example.tags is None


def test_malformed_tag_and_column_count_are_errors_naming_the_line(tmp_path):
  with pytest.raises(GlueFormatError, match=r"bad.txt:2: tag 'PER'"):
    conll.read_conll(_write(tmp_path, "bad.txt", "John B-PER\nSmith PER\n"))
  with pytest.raises(GlueFormatError, match=r"cols.txt:2: expected 2 columns"):
    conll.read_conll(_write(tmp_path, "cols.txt", "John B-PER\nSmith NNP I-PER\n"))
  with pytest.raises(GlueFormatError, match=r"tags.txt:1: unknown tag 'B-ANIMAL'"):
    conll.read_conll(_write(tmp_path, "tags.txt", "Cat B-ANIMAL\n"), conll.CONLL2003_LABELS)


def _features(tmp_path, examples, seq_length, window_stride=64):
  vocab = helpers.write_vocab(tmp_path / "vocab.txt")
  tokenizer = featurizers.PieceTokenizer(vocab)
  return helpers.vocab_ids(vocab), list(tagging.tagging_dataset(
      examples, tokenizer, seq_length, conll.CONLL2003_LABELS,
      window_stride).as_numpy_iterator())


def test_only_the_first_piece_of_a_split_word_carries_its_label(tmp_path):
  examples = [conll.TaggingExample(0, ["John", "playing", "Parisians"],
                                   ["B-PER", "O", "B-MISC"])]
  ids, [features] = _features(tmp_path, examples, 16)
  pieces = ["[CLS]", "john", "play", "##ing", "paris", "##ians", "[SEP]"]
  assert features[constants.INPUT_WORD_IDS].tolist() == [ids[p] for p in pieces]
  tag = conll.CONLL2003_LABELS.index
  assert features[constants.LABEL_IDS].tolist() == [-1, tag("B-PER"), tag("O"), -1, tag("B-MISC"), -1,
                                             -1]


def test_word_without_pieces_becomes_unk_and_keeps_its_label(tmp_path):
  examples = [conll.TaggingExample(0, ["John", "\u200b", "Paris"], ["B-PER", "I-PER", "B-LOC"])]
  ids, [features] = _features(tmp_path, examples, 16)
  assert features[constants.INPUT_WORD_IDS].tolist()[1:4] == [ids["john"], ids["[UNK]"],
                                                              ids["paris"]]
  assert (features[constants.LABEL_IDS] >= 0).sum() == 3


def test_long_sentences_are_read_in_windows_that_label_each_word_once(tmp_path):
  words = ["playing", "John", "playing", "Paris", "playing"]
  tags = ["O", "B-PER", "O", "B-LOC", "O"]
  examples = [conll.TaggingExample(0, words, tags)]
  ids, rows = _features(tmp_path, examples, 8, window_stride=2)
  # 8 pieces (play ##ing john play ##ing paris play ##ing), windows of 6 pieces two apart:
  # pieces [0, 6) and [2, 8). Word first pieces 0, 2, 3, 5, 6: pieces 0-3 have their most
  # context in window 0 (piece 3: min(3, 2) = 2 against min(1, 4) = 1), 5 and 6 in window 1.
  assert [(r[constants.EXAMPLE_INDEX], r[constants.WINDOW_INDEX]) for r in rows] == [
      (0, 0), (0, 1)]
  play, ing = ids["play"], ids["##ing"]
  assert rows[1][constants.INPUT_WORD_IDS].tolist() == [
      ids["[CLS]"], ids["john"], play, ing, ids["paris"], play, ing, ids["[SEP]"]]
  tag = conll.CONLL2003_LABELS.index
  ignore = constants.IGNORE_LABEL
  assert rows[0][constants.LABEL_IDS].tolist() == [
      ignore, tag("O"), ignore, tag("B-PER"), tag("O"), ignore, ignore, ignore]
  assert rows[1][constants.LABEL_IDS].tolist() == [
      ignore, ignore, ignore, ignore, tag("B-LOC"), tag("O"), ignore, ignore]
