"""SWAG CSV reader and multiple-choice features."""

import pytest

import finetuning_helpers as helpers
from bert_tf import constants
from bert_tf.data.pipelines import featurizers
from bert_tf.data.pipelines.loaders import multiple_choice
from bert_tf.data.task_files import swag
from bert_tf.data.task_files.glue import GlueFormatError

HEADER = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"


def _write(tmp_path, name, text):
  path = tmp_path / name
  path.write_text(text, encoding="utf-8")
  return str(path)


def test_context_is_sent1_and_each_choice_is_sent2_plus_ending(tmp_path):
  text = HEADER + '0,v1,5,"A man walks. The dog",A man walks.,The dog,gold,runs.,sat.,"eats, then",flies.,2\n'
  [example] = swag.read_swag(_write(tmp_path, "val.csv", text))
  assert example.context == "A man walks."
  assert example.endings == ["The dog runs.", "The dog sat.", "The dog eats, then",
                             "The dog flies."]
  assert example.label == 2


def test_test_file_without_label_column_is_unlabelled(tmp_path):
  header = HEADER.replace(",label\n", "\n")
  [example] = swag.read_swag(_write(tmp_path, "test.csv", header + "0,v,1,s,A.,B,gen,a,b,c,d\n"))
  assert example.label is None


def test_bad_label_and_short_row_are_errors_naming_the_line(tmp_path):
  with pytest.raises(GlueFormatError, match=r"bad.csv:2: label '4'"):
    swag.read_swag(_write(tmp_path, "bad.csv", HEADER + "0,v,1,s,A.,B,gen,a,b,c,d,4\n"))
  with pytest.raises(GlueFormatError, match=r"short.csv:3: expected 12 columns"):
    swag.read_swag(_write(tmp_path, "short.csv", HEADER + "0,v,1,s,A.,B,gen,a,b,c,d,1\n"
                          "1,v,1,s,A.,B,gen,a,b\n"))


def test_features_hold_one_cls_context_sep_choice_sep_row_per_choice(tmp_path):
  vocab = helpers.write_vocab(tmp_path / "vocab.txt")
  ids = helpers.vocab_ids(vocab)
  example = swag.MultipleChoiceExample(0, "a man walks", ["the dog runs", "home"], 1)
  [features] = list(multiple_choice.multiple_choice_dataset([example], featurizers.PieceTokenizer(vocab), 8, 2)
                    .as_numpy_iterator())
  rows = features[constants.INPUT_WORD_IDS]
  assert rows.shape == (2, 8)
  # Three pieces each and a budget of five: the original rule cuts the ending on the tie.
  first = ["[CLS]", "a", "man", "walks", "[SEP]", "the", "dog", "[SEP]"]
  second = ["[CLS]", "a", "man", "walks", "[SEP]", "home", "[SEP]"]
  assert rows[0].tolist() == [ids[t] for t in first]
  assert rows[1].tolist() == [ids[t] for t in second] + [0]
  assert features[constants.INPUT_MASK][1].tolist() == [1] * 7 + [0]
  assert features[constants.LABEL_IDS] == 1
