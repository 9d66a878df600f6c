"""Every tool reads a vocab file through bert_tf.text.vocab.load_vocab: same rules, same size."""

import pytest

from bert_tf import constants
from bert_tf.checkpoints import files as checkpoint_files
from bert_tf.data.pipelines import masking
from bert_tf.data.creation import pretraining_inputs
from bert_tf.data.creation import pretraining_instances as pi
from bert_tf.data.pipelines import squad_features
from bert_tf.data.records import squad_records
from bert_tf.text import vocab as vocab_lib
from bert_tf.text.tokenizer import BertWordPieceTokenizer
from bert_tf.training import run_checks

import trainer_helpers

TOKENS = [*constants.SPECIAL_TOKENS, "the", "cat", "##s"]


def _readers(path):
  """What each tool learns from the file, as (size, [CLS] id) or just size."""
  tokenizer = BertWordPieceTokenizer(path, lower_case=True)
  special = masking.read_masking_vocab(path)
  pretraining = pretraining_inputs.load_special_ids(path)
  squad_tokens = squad_features.vocab_list(tokenizer)
  return {
      "tokenizer": (tokenizer.vocab_size, tokenizer.cls_id),
      "masking": (special.vocab_size, special.cls_id),
      "create_pretraining_data": (pretraining.vocab_size, pretraining.cls_id),
      "squad": (len(squad_tokens), squad_tokens.index(constants.CLS_TOKEN)),
      "checkpoint conversion": (checkpoint_files.count_vocab(path),
                                TOKENS.index(constants.CLS_TOKEN)),
  }


def test_every_reader_agrees_on_crlf_lines_and_a_missing_final_newline(tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_bytes("\r\n".join(TOKENS).encode("utf-8"))
  expected = (len(TOKENS), TOKENS.index(constants.CLS_TOKEN))
  assert set(_readers(str(path)).values()) == {expected}


@pytest.mark.parametrize("lines, message", [
    (TOKENS[:6] + ["", *TOKENS[6:]], "line 7: empty line"),
    (TOKENS[:6] + [" cat", *TOKENS[6:]], "line 7: token ' cat' has leading"),
    (TOKENS + ["cat"], "line 9: duplicate token 'cat'"),
])
def test_every_reader_rejects_a_malformed_vocab_naming_the_file_and_line(tmp_path, lines,
                                                                         message):
  path = str(tmp_path / "bad_vocab.txt")
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  questions = tmp_path / "questions.json"
  questions.write_text('{"data": []}', encoding="utf-8")
  readers = [
      lambda: BertWordPieceTokenizer(path, lower_case=True),
      lambda: masking.read_masking_vocab(path),
      lambda: pretraining_inputs.load_special_ids(path),
      lambda: squad_records.write_squad_tfrecords(str(questions),
                                                  str(tmp_path / "out.tfrecord"),
                                                  lambda texts: [], is_training=False,
                                                  vocab_file=path),
      lambda: checkpoint_files.count_vocab(path),
  ]
  for read in readers:
    with pytest.raises(ValueError, match=f"bad_vocab.txt, {message}"):
      read()


def test_special_ids_of_masking_name_the_vocab_and_the_missing_token(tmp_path):
  path = str(tmp_path / "no_mask.txt")
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(t for t in TOKENS if t != constants.MASK_TOKEN) + "\n")
  with pytest.raises(ValueError, match=r"no_mask.txt: .*\[MASK\]"):
    masking.read_masking_vocab(path)
  with pytest.raises(ValueError, match=r"\[MASK\]"):
    pi.SpecialIds.from_vocab([t for t in TOKENS if t != constants.MASK_TOKEN])


def _words(count, capitalized=0):
  """`count` distinct lower-case words, the first `capitalized` of them capitalized."""
  letters = "abcdefghijklmnopqrstuvwxyz"
  words = [letters[i // 26 % 26] + letters[i % 26] + letters[i // 676 % 26] + "x"
           for i in range(count)]
  return [w.capitalize() for w in words[:capitalized]] + words[capitalized:]


def _vocab_file(tmp_path, name, words):
  path = str(tmp_path / name)
  vocab_lib.write_vocab([*constants.SPECIAL_TOKENS, *words], path)
  return path


@pytest.mark.parametrize("name, words, lower_case, message", [
    # BERT's cased vocab: 31% of its tokens with letters hold capitals.
    ("cased.txt", _words(1000, capitalized=300), True, "a cased vocab (300 of its 1000"),
    ("uncased.txt", _words(1200), False, "an uncased vocab (0 of its 1200"),
])
def test_a_vocab_whose_casing_contradicts_lower_case_is_refused_naming_it(
    tmp_path, name, words, lower_case, message):
  path = _vocab_file(tmp_path, name, words)
  experiment = trainer_helpers.tiny_experiment(
      tokenizer=dict(vocab_file=path, lower_case=lower_case),
      model=dict(encoder=dict(trainer_helpers.TINY_ENCODER,
                              vocab_size=len(constants.SPECIAL_TOKENS) + len(words))))
  readers = {
      "create_finetuning_data (the tokenizer)": lambda case: BertWordPieceTokenizer(
          path, lower_case=case),
      "create_pretraining_data": lambda case: pretraining_inputs.load_special_ids(path, case),
      "train": lambda case: run_checks.check_vocab_size(experiment.override(
          {"tokenizer": {"lower_case": case}})),
  }
  for what, read in readers.items():
    with pytest.raises(ValueError) as raised:
      read(lower_case)
    assert str(raised.value).startswith(f"{path}: {message}"), what
    assert "\n" not in str(raised.value), what
    read(not lower_case)  # the vocab's own casing


def test_a_vocab_whose_tokens_do_not_tell_its_casing_is_read_with_either_setting():
  # Too few tokens with letters; none with a case (CJK); 1.5% with capitals, between a
  # cased vocab and an uncased one with a few tokens added.
  for words in (_words(100), ["東", "京", "##京"], _words(2000, capitalized=30)):
    for lower_case in (True, False):
      vocab_lib.check_casing([*constants.SPECIAL_TOKENS, *words], lower_case)
  # 0.25% with capitals: an uncased vocab with a few tokens added.
  with pytest.raises(vocab_lib.VocabCasingError, match="an uncased vocab"):
    vocab_lib.check_casing(_words(2000, capitalized=5), False)
