"""SQuAD reading and feature creation: alignment, windows, labels, TFRecords, bad input."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import configs
from bert_tf import constants
from bert_tf.data.task_files import squad
from bert_tf.data.pipelines import squad_features
from bert_tf.data.pipelines.loaders import squad as squad_kind
from bert_tf.data.records import squad_records
from bert_tf.data.records import tfrecords

# A small uncased vocab covering the test contexts. Words not in it become [UNK].
WORDS = [
    "the", "a", "of", "in", "and", "is", "was", "where", "who", "what", "when", "did",
    "born", "died", "city", "cafe", "uber", "tokyo", "zz", "answer", "marker", "paris",
    "steve", "smith", "went", "to", "after", "before", "x", "y", "he", "she", "it", "then",
    "1895", "1943", "year", "word", "river", "long", "name", "##s", "##ing", "play",
    "東", "京", "(", ")", ".", ",", "-", "'", "?",
]
VOCAB = list(constants.SPECIAL_TOKENS) + WORDS + [f"w{i}" for i in range(40)]


def write_vocab(tmp_path, tokens=VOCAB) -> str:
  path = os.path.join(str(tmp_path), "vocab.txt")
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(tokens) + "\n")
  return path


def make_tokenize_fn(vocab_path: str, lower_case: bool = True):
  """The project tokenizer, adapted into a tokenize_fn."""
  from bert_tf.text.tokenizer import BertWordPieceTokenizer  # pylint: disable=g-import-not-at-top
  return squad_features.tokenize_fn_from_tokenizer(BertWordPieceTokenizer(vocab_path,
                                                                          lower_case=lower_case))


def vocab_ids(tokens=VOCAB):
  return {t: i for i, t in enumerate(tokens)}


def squad_json(paragraphs, version="1.1"):
  """{"version", "data"} with one article holding `paragraphs`."""
  return {"version": version, "data": [{"title": "t", "paragraphs": paragraphs}]}


def qa(qid, question, answer_text=None, context=None, answer_start=None, impossible=False):
  if impossible:
    return {"id": qid, "question": question, "answers": [], "is_impossible": True}
  if answer_start is None:
    answer_start = context.index(answer_text)
  return {"id": qid, "question": question,
          "answers": [{"text": answer_text, "answer_start": answer_start}]}


@pytest.fixture(scope="module")
def tokenize_fn(tmp_path_factory):
  return make_tokenize_fn(write_vocab(tmp_path_factory.mktemp("vocab")))


def test_split_context_maps_every_character_to_its_word():
  words, offsets = squad.split_context(" ab  c\td\u202fe")
  assert words == ["ab", "c", "d", "e"]
  assert offsets == [-1, 0, 0, 0, 0, 1, 1, 2, 2, 3]


def test_read_examples_locates_answer_words_and_skips_unfindable_answers():
  context = "Steve Smith went to Paris in 1895."
  data = squad_json([{"context": context, "qas": [
      qa("q1", "Who went?", "Steve Smith", context),
      qa("q2", "When?", "1895", context),
      qa("bad", "Where?", "London", context, answer_start=20),
  ]}])["data"]
  examples, skipped = squad.read_squad_examples(data, is_training=True,
                                                version_2_with_negative=False)
  assert skipped == 1
  assert [e.qas_id for e in examples] == ["q1", "q2"]
  assert (examples[0].start_position, examples[0].end_position) == (0, 1)
  # "1895." is the 7th word; the answer lies inside it.
  assert (examples[1].start_position, examples[1].end_position) == (6, 6)
  # Evaluation keeps the question whose answer cannot be located, without a label.
  examples, skipped = squad.read_squad_examples(data, is_training=False,
                                                version_2_with_negative=False)
  assert skipped == 0 and examples[2].qas_id == "bad" and examples[2].start_position == -1


def test_an_evaluation_question_without_answers_is_refused_naming_the_question(tmp_path):
  path = tmp_path / "dev.json"
  path.write_text(json.dumps(squad_json([{"context": "Steve went", "qas": [
      qa("q1", "Who?", "Steve", "Steve went"), {"id": "q2", "question": "Where?"}]}])))
  data = configs.DataConfig(format="squad_json", input_path=str(path), is_training=False)
  with pytest.raises(squad.SquadFormatError) as raised:
    squad.read_squad_file(data, {"version_2_with_negative": True})
  assert str(raised.value) == (f"{path}: data[0].paragraphs[0].qas[1] has no answers and "
                               "is not marked is_impossible; a file to train or evaluate "
                               "on needs its labels")
  # Questions to answer (serving, predictions) are read without answers.
  examples, _ = squad.read_squad_examples(str(path), False, True)
  assert [e.answers for e in examples] == [["Steve"], []]


def test_invalid_json_error_names_file_and_line(tmp_path):
  path = tmp_path / "broken.json"
  path.write_text('{"data": [\n  {"paragraphs": [}\n]}')
  with pytest.raises(squad.SquadFormatError, match=r"broken\.json: invalid JSON at line 2"):
    squad.read_squad_examples(str(path), is_training=True, version_2_with_negative=False)


def test_missing_field_error_names_question(tmp_path):
  path = tmp_path / "nofield.json"
  path.write_text(json.dumps(squad_json([{"context": "a b", "qas": [{"id": "x"}]}])))
  with pytest.raises(squad.SquadFormatError, match=r"nofield\.json: data\[0\]\.paragraphs\[0\]"
                     r"\.qas\[0\] needs 'id' and 'question'"):
    squad.read_squad_examples(str(path), is_training=True, version_2_with_negative=False)


def test_improved_span_drops_punctuation_around_answer(tokenize_fn):
  context = "Smith (1895-1943) was born."
  data = squad_json([{"context": context, "qas": [qa("q", "When born?", "1895", context)]}])
  examples, _ = squad.read_squad_examples(data["data"], True, False)
  features = squad_features.convert_examples_to_features(examples, tokenize_fn, vocab_ids(),
                                                         max_seq_length=32, doc_stride=8)
  f = features[0]
  assert f.tokens[f.start_position:f.end_position + 1] == ["1895"]


def test_answer_straddling_windows_is_labelled_only_where_fully_contained(tokenize_fn):
  # 24 one-piece words; windows of 10 context tokens every 4 tokens.
  words = [f"w{i}" for i in range(24)]
  context = " ".join(words)
  answer = "w9 w10 w11"
  data = squad_json([{"context": context, "qas": [qa("q", "where", answer, context)]}])
  examples, _ = squad.read_squad_examples(data["data"], True, False)
  # [CLS] where [SEP] + 10 context + [SEP] = 14.
  features = squad_features.convert_examples_to_features(examples, tokenize_fn, vocab_ids(),
                                                         max_seq_length=14, doc_stride=4,
                                                         max_query_length=8)
  starts = [0, 4, 8, 12, 16]
  assert len(features) == len(starts)
  labelled = []
  for f, start in zip(features, starts):
    context_tokens = f.tokens[3:-1]
    assert context_tokens == words[start:start + 10]
    holds = start <= 9 and 11 <= start + 9
    if holds:
      labelled.append(f.doc_span_index)
      assert f.tokens[f.start_position:f.end_position + 1] == answer.split()
    else:
      assert (f.start_position, f.end_position) == (0, 0)
  # w9..w11 fit in windows starting at 4 and 8, not in 0 (ends at w9) or 12.
  assert labelled == [1, 2]


def test_max_context_flags_pick_the_most_centred_window(tokenize_fn):
  context = " ".join(f"w{i}" for i in range(24))
  data = squad_json([{"context": context, "qas": [qa("q", "where", "w0", context)]}])
  examples, _ = squad.read_squad_examples(data["data"], True, False)
  features = squad_features.convert_examples_to_features(examples, tokenize_fn, vocab_ids(),
                                                         max_seq_length=14, doc_stride=4)
  # Each document token is max-context in exactly one window.
  counts = np.zeros(24, int)
  for f in features:
    for pos, is_max in f.token_is_max_context.items():
      counts[f.token_to_orig_map[pos]] += int(is_max)
  assert counts.tolist() == [1] * 24
  # w9 sits at offsets 9 (window 0), 5 (window 1), 1 (window 2): window 1 is most centred.
  w9 = {f.doc_span_index: f.token_is_max_context[f.tokens.index("w9")]
        for f in features if "w9" in f.tokens}
  assert w9 == {0: False, 1: True, 2: False}


def test_non_ascii_context_aligns_answer_after_accents_and_cjk(tokenize_fn):
  context = "Café über 東京 is where the zz marker answer was."
  data = squad_json([{"context": context, "qas": [qa("q", "what is after zz?", "marker",
                                                     context)]}])
  examples, _ = squad.read_squad_examples(data["data"], True, False)
  ex = examples[0]
  assert ex.doc_tokens[ex.start_position] == "marker"
  features = squad_features.convert_examples_to_features(examples, tokenize_fn, vocab_ids(),
                                                         max_seq_length=40)
  f = features[0]
  context_tokens = f.tokens[f.tokens.index(constants.SEP_TOKEN) + 1:-1]
  assert context_tokens[:4] == ["cafe", "uber", "東", "京"]
  assert f.tokens[f.start_position:f.end_position + 1] == ["marker"]
  # Both CJK pieces map back to the one whitespace word "東京".
  cjk = [f.token_to_orig_map[i] for i, t in enumerate(f.tokens) if t in ("東", "京")]
  assert cjk == [2, 2] and ex.doc_tokens[2] == "東京"
  assert ex.doc_tokens[f.token_to_orig_map[f.start_position]] == "marker"


def test_unanswerable_questions_point_every_window_at_cls(tokenize_fn):
  context = " ".join(f"w{i}" for i in range(20))
  data = squad_json([{"context": context, "qas": [qa("q", "who", impossible=True)]}], "v2.0")
  examples, _ = squad.read_squad_examples(data["data"], True, version_2_with_negative=True)
  features = squad_features.convert_examples_to_features(examples, tokenize_fn, vocab_ids(),
                                                         max_seq_length=12, doc_stride=4)
  assert len(features) > 1
  assert all((f.start_position, f.end_position, f.is_impossible) == (0, 0, True)
             for f in features)


def test_question_is_cut_to_max_query_length_and_padding_is_masked(tokenize_fn):
  context = "w1 w2 w3"
  question = " ".join(["w5"] * 10)
  data = squad_json([{"context": context, "qas": [qa("q", question, "w2", context)]}])
  examples, _ = squad.read_squad_examples(data["data"], True, False)
  f = squad_features.convert_examples_to_features(examples, tokenize_fn, vocab_ids(),
                                                  max_seq_length=16, max_query_length=4)[0]
  assert f.tokens == ["[CLS]", "w5", "w5", "w5", "w5", "[SEP]", "w1", "w2", "w3", "[SEP]"]
  assert f.input_mask == [1] * 10 + [0] * 6
  assert f.segment_ids == [0] * 6 + [1] * 4 + [0] * 6
  assert f.input_ids[:2] == [VOCAB.index("[CLS]"), VOCAB.index("w5")]
  assert f.tokens[f.start_position] == "w2"


def _two_question_file(tmp_path):
  context = "Steve Smith went to Paris in 1895."
  path = os.path.join(str(tmp_path), "train.json")
  with open(path, "w") as f:
    json.dump(squad_json([{"context": context, "qas": [
        qa("q1", "Who went?", "Steve Smith", context),
        qa("q2", "Where did he go?", "Paris", context),
        qa("bad", "Where?", "London", context, answer_start=3)]}]), f)
  return path


def test_tfrecords_round_trip_the_features(tmp_path):
  vocab_path = write_vocab(tmp_path)
  path = _two_question_file(tmp_path)
  out = os.path.join(str(tmp_path), "train.tfrecord")
  summary = squad_records.write_squad_tfrecords(path, out, make_tokenize_fn(vocab_path),
                                                vocab_file=vocab_path, is_training=True,
                                                max_seq_length=24)
  assert summary == {"num_examples": 2, "num_features": 2, "num_skipped": 1}
  assert [n for n in os.listdir(str(tmp_path)) if ".tmp" in n] == []
  spec = squad_kind.squad_spec(24)
  records = list(tf.data.TFRecordDataset(out).map(
      lambda r: tfrecords.parse_records(r, spec)).as_numpy_iterator())
  examples, _ = squad.read_squad_examples(path, True, False)
  expected = squad_features.features_to_arrays(squad_features.convert_examples_to_features(
      examples, make_tokenize_fn(vocab_path), vocab_ids(), max_seq_length=24))
  for name, values in expected.items():
    np.testing.assert_array_equal(np.stack([r[name] for r in records]), values, err_msg=name)


def test_interrupted_tfrecord_write_leaves_no_file(tmp_path, tokenize_fn):
  context = "w1 w2 w3"
  data = squad_json([{"context": context, "qas": [qa("q", "where", "w2", context)]}])
  examples, _ = squad.read_squad_examples(data["data"], True, False)
  features = squad_features.convert_examples_to_features(examples, tokenize_fn, vocab_ids(),
                                                         max_seq_length=16)
  out = os.path.join(str(tmp_path), "out.tfrecord")
  with pytest.raises(AttributeError):
    squad_records.write_features_tfrecord([features[0], None], out)
  assert os.listdir(str(tmp_path)) == []
