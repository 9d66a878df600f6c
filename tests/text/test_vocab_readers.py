"""Every tool reads a vocab file through bert_tf.text.vocab.load_vocab: same rules, same size."""

import pytest

from bert_tf import constants
from bert_tf.checkpoints import files as checkpoint_files
from bert_tf.data.pipelines import masking
from bert_tf.data.creation import pretraining_inputs
from bert_tf.data.creation import pretraining_instances as pi
from bert_tf.data.pipelines import squad_features
from bert_tf.data.records import squad_records
from bert_tf.text.tokenizer import BertWordPieceTokenizer

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
