"""Task exports: classification, regression, SQuAD and tagging signatures."""

import os

import numpy as np
import pytest
import tensorflow as tf

import export_helpers as helpers
from bert_tf.export import classifier_serving as cs
from bert_tf.export import exporter
from bert_tf.export import query
from bert_tf.export import serving_ops_check
from bert_tf.export import squad_serving as ss
from bert_tf.export import tagging_serving as ts

MNLI = {"name": "sentence_prediction", "glue_task": "mnli"}
STSB = {"name": "sentence_prediction", "glue_task": "stsb"}
SQUAD = {"name": "squad", "max_query_length": 8, "max_answer_length": 5}
SQUAD2 = dict(SQUAD, version_2_with_negative=True, null_score_diff_threshold=-1e6)
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
TAGGING = {"name": "tagging", "label_names": TAGS}

CONTEXTS = ["John lives in Paris , the capital of France .", "Mary visited London !",
            "", "Wörld café? the dog ran in the park ."]
QUESTIONS = ["Where does John live?", "who visited london", "what", ""]


def _module(tmp_path, task):
  vocab = helpers.write_vocab(tmp_path / task["name"])
  config = helpers.experiment(vocab, task)
  return exporter.build_serving_module(config, helpers.build_model(config), vocab)


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("tasks")
  return {name: _module(tmp, task) for name, task in
          (("mnli", MNLI), ("squad", SQUAD), ("tagging", TAGGING))}


def _texts(name):
  bad = helpers.BAD_TEXTS
  return {
      "mnli": {"text": bad, "text_b": list(reversed(bad))},
      "squad": {"question": [q.encode() for q in QUESTIONS] + bad[:3],
                "context": [c.encode() for c in CONTEXTS] + bad[3:6]},
      "tagging": {"text": [c.encode() for c in CONTEXTS] + bad},
  }[name]


@pytest.fixture(scope="module")
def export_of(modules, tmp_path_factory):
  """name -> (export path, fresh-process result); each export is made once, when asked."""
  tmp = tmp_path_factory.mktemp("task_exports")
  cache = {}

  def get(name):
    if name not in cache:
      module = modules[name]
      path = exporter.write_saved_model(module, str(tmp / name))
      calls = helpers.signature_calls(module, _texts(name))
      plan = (path, calls, helpers.rest_bodies(module, _texts(name)))
      cache[name] = (path, helpers.run_fresh_process([plan], tmp / f"{name}_plan")[0])
    return cache[name]

  return get


SLOW_EXPORTS = [pytest.param("squad", marks=pytest.mark.slow),
                pytest.param("tagging", marks=pytest.mark.slow)]


@pytest.mark.parametrize("name", ["mnli", *SLOW_EXPORTS])
def test_fresh_process_matches_in_process_and_accepts_rest_bodies(export_of, name):
  result = export_of(name)[1]
  helpers.assert_fresh_result_ok(result)
  assert len(result["rest"]) == 6


@pytest.mark.parametrize("name", ["mnli", *SLOW_EXPORTS])
def test_task_exports_use_only_allowlisted_ops(export_of, name):
  assert serving_ops_check.unexpected_ops(export_of(name)[0]) == set()


def test_label_names_travel_as_an_asset(export_of):
  path = export_of("mnli")[0]
  assert sorted(os.listdir(os.path.join(path, "assets"))) == ["labels.txt", "vocab.txt"]
  with open(os.path.join(path, "assets", "labels.txt"), encoding="utf-8") as f:
    assert f.read().split() == ["contradiction", "entailment", "neutral"]


def test_classifier_outputs_probabilities_ids_and_their_names(modules):
  module = modules["mnli"]
  out = module.predict_text({"text": tf.constant(["the cat", ""]),
                             "text_b": tf.constant(["a dog", "x" * 5000])})
  np.testing.assert_allclose(tf.reduce_sum(out[cs.PROBABILITIES], -1), [1, 1], atol=1e-6)
  np.testing.assert_array_equal(out[cs.LABEL_IDS], tf.argmax(out[cs.PROBABILITIES], -1))
  names = ["contradiction", "entailment", "neutral"]
  assert [n.decode() for n in out[cs.LABEL_NAMES].numpy()] == [
      names[i] for i in out[cs.LABEL_IDS].numpy()]
  assert module.text_inputs == ("text", "text_b")


def test_regression_outputs_only_a_score(tmp_path):
  module = _module(tmp_path, STSB)
  out = module.predict_text({"text": tf.constant(["the cat", "a"]),
                             "text_b": tf.constant(["a dog", ""])})
  assert set(out) == {cs.SCORE, cs.TRUNCATED_TOKENS} and out[cs.SCORE].shape == (2,)


def _chars(value, text):
  return text[int(value[0]):int(value[1])]


def test_squad_answer_is_the_context_between_its_character_offsets(modules):
  out = modules["squad"].predict_text({"question": tf.constant(QUESTIONS),
                                       "context": tf.constant(CONTEXTS)})
  has_answer = out[ss.HAS_ANSWER].numpy()
  assert has_answer.tolist()[2] is False  # An empty context has no answer.
  assert has_answer[0] and has_answer[1]
  for i, context in enumerate(CONTEXTS):
    text = out[ss.ANSWER_TEXT].numpy()[i].decode("utf-8")
    start, end = out[ss.ANSWER_START].numpy()[i], out[ss.ANSWER_END].numpy()[i]
    if has_answer[i]:
      assert text and context[start:end] == text
      assert out[ss.END_INDEX][i] - out[ss.START_INDEX][i] < SQUAD["max_answer_length"]
    else:
      assert (text, start, end) == ("", -1, -1)


def test_squad2_threshold_decides_the_null_answer(tmp_path):
  module = _module(tmp_path, SQUAD2)
  out = module.predict_text({"question": tf.constant(QUESTIONS[:2]),
                             "context": tf.constant(CONTEXTS[:2])})
  # A threshold of -1e6 always prefers the null answer.
  assert out[ss.HAS_ANSWER].numpy().tolist() == [False, False]
  assert out[ss.ANSWER_TEXT].numpy().tolist() == [b"", b""]


def test_entities_are_the_text_between_their_character_offsets(modules):
  texts = CONTEXTS + ["héllo " * 30]
  out = modules["tagging"].predict_text({"text": tf.constant(texts)})
  counts = out[ts.ENTITY_COUNT].numpy()
  assert counts.sum() > 0
  for i, text in enumerate(texts):
    types = out[ts.ENTITY_TYPES].numpy()[i]
    assert all(t in (b"PER", b"LOC") for t in types[:counts[i]])
    assert all(t == b"" for t in types[counts[i]:])
    for e in range(counts[i]):
      span = (out[ts.ENTITY_START][i, e], out[ts.ENTITY_END][i, e])
      assert _chars(span, text) == out[ts.ENTITY_TEXT].numpy()[i, e].decode("utf-8")


@pytest.mark.parametrize("name", ["mnli", "squad", "tagging"])
def test_a_batch_of_only_empty_texts_gets_an_answer_per_row(modules, name):
  module = modules[name]
  texts = {n: tf.constant(["", " \t "]) for n in module.text_inputs}
  out = module.predict_text(texts)
  assert all(v.shape[0] == 2 for v in out.values())


def test_outputs_count_the_tokens_cut_to_fit(modules):
  long_text = "the cat sat on the mat " * 10
  out = modules["mnli"].predict_text({"text": tf.constant(["the cat", long_text]),
                                      "text_b": tf.constant(["a dog", "a dog"])})
  # 60 + 2 pieces, of which seq_length - 3 fit.
  assert out[cs.TRUNCATED_TOKENS].numpy().tolist() == [0, 62 - (helpers.SEQ_LENGTH - 3)]


def test_tagging_reads_a_long_text_in_windows_and_says_how_many(modules):
  long_text = "the cat sat on the mat " * 10
  out = modules["tagging"].predict_text({"text": tf.constant(["the cat", long_text])})
  # 60 pieces in windows of seq_length - 2 = 22, 22 apart (window_stride 64 is more).
  assert out[ts.NUM_WINDOWS].numpy().tolist() == [1, 3]


def _questions(name):
  """The texts of two questions to the export `name`, flat, in the export's input order."""
  return {"mnli": ["the cat sat", "a dog ran", "", "hello world"],
          "squad": [QUESTIONS[0], CONTEXTS[0], QUESTIONS[1], CONTEXTS[1]],
          "tagging": CONTEXTS[:2]}[name]


@pytest.mark.parametrize("name", ["mnli", *SLOW_EXPORTS])
def test_query_answers_as_the_served_signature_does(export_of, modules, name):
  export = query.load(export_of(name)[0])
  assert export.inputs == modules[name].text_inputs
  texts = _questions(name)
  answers = query.ask(export, texts)
  width = len(export.inputs)
  served = modules[name].predict_text(
      {n: tf.constant(texts[i::width]) for i, n in enumerate(export.inputs)})
  for i, answer in enumerate(answers):
    assert len(query.describe(answer)) == 2
    if name == "mnli":
      assert answer["label"] == served[cs.LABEL_NAMES].numpy()[i].decode()
      np.testing.assert_allclose(answer["probabilities"], served[cs.PROBABILITIES][i],
                                 atol=1e-6)
    elif name == "squad":
      context = answer["context"]
      assert answer["answer"] == context[answer["start"]:answer["end"]]
      assert answer["answer"] == served[ss.ANSWER_TEXT].numpy()[i].decode()
    else:
      assert len(answer["entities"]) == served[ts.ENTITY_COUNT][i]
      for entity in answer["entities"]:
        assert answer["text"][entity["start"]:entity["end"]] == entity["text"]
