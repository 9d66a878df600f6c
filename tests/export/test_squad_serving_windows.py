"""The SQuAD export answers long contexts as evaluation does: every window, same span."""

import numpy as np
import pytest
import tensorflow as tf

import export_helpers as helpers
from bert_tf.data.task_files import squad as squad_data
from bert_tf.data.pipelines import squad_features
from bert_tf.data.task_files import squad_postprocess
from bert_tf.export import exporter
from bert_tf.export import squad_serving as ss
from bert_tf.text.tokenizer import BertWordPieceTokenizer

SEQ_LENGTH = 24
SQUAD = {"name": "squad", "max_query_length": 8, "max_answer_length": 5, "doc_stride": 5,
         "n_best_size": 6}

_SENTENCES = ["John lives in Paris, the capital of France.", "Mary visited London!",
              "the dog ran in the park .", "the cat sat on a mat.",
              "Where is the good city? England is a good city.",
              "who lives in london, the city of England?"]


def _contexts():
  """Contexts from one to ~12 windows long, and an empty one."""
  rng = np.random.default_rng(3)
  contexts = [" ".join(rng.choice(_SENTENCES, size=n)) for n in (1, 3, 6, 9, 14, 20)]
  return contexts + ["", "Paris"]


QUESTIONS = ["Where does John live?", "who visited london", "what is good", "",
             "where is the cat sat on the mat in the park", "what city", "who", "where"]


def _data(contexts, questions):
  return [{"paragraphs": [{"context": c, "qas": [{"id": f"q{i}", "question": q,
                                                   "answers": []}]}]}
          for i, (c, q) in enumerate(zip(contexts, questions))]


def evaluated_answers(module, experiment, contexts, questions, version_2=False):
  """Answers by the evaluation path: windows, the model on them, postprocess."""
  examples, _ = squad_data.read_squad_examples(_data(contexts, questions), False, version_2)
  settings = experiment.tokenizer
  tokenizer = BertWordPieceTokenizer(settings.vocab_file, lower_case=settings.lower_case)
  vocab = {t: i for i, t in enumerate(squad_features.vocab_list(tokenizer))}
  task = experiment.task
  features = squad_features.convert_examples_to_features(
      examples, squad_features.tokenize_fn_from_tokenizer(tokenizer), vocab,
      max_seq_length=SEQ_LENGTH, doc_stride=task.doc_stride,
      max_query_length=task.max_query_length)
  arrays = squad_features.features_to_arrays(features)
  outputs = module.call_model(arrays)
  results = {int(u): (s, e) for u, s, e in zip(arrays[squad_data.UNIQUE_IDS],
                                                outputs["start_logits"].numpy(),
                                                outputs["end_logits"].numpy())}
  predicted = squad_postprocess.postprocess(
      examples, features, results, n_best_size=task.n_best_size,
      max_answer_length=task.max_answer_length, lower_case=settings.lower_case,
      version_2_with_negative=version_2,
      null_score_diff_threshold=task.null_score_diff_threshold)
  return predicted, features


@pytest.fixture(scope="module")
def squad_module(tmp_path_factory):
  vocab = helpers.write_vocab(tmp_path_factory.mktemp("squad_windows"))
  config = helpers.experiment(vocab, SQUAD, seq_length=SEQ_LENGTH)
  return config, exporter.build_serving_module(config, helpers.build_model(config), vocab)


def test_served_answers_equal_evaluated_answers_on_long_contexts(squad_module):
  config, module = squad_module
  contexts = _contexts()
  served = module.predict_text({"question": tf.constant(QUESTIONS),
                                "context": tf.constant(contexts)})
  predicted, features = evaluated_answers(module, config, contexts, QUESTIONS)
  windows = np.bincount([f.example_index for f in features], minlength=len(contexts))
  # The empty context has no window in evaluation and one empty window served.
  assert served[ss.NUM_WINDOWS].numpy().tolist() == [max(n, 1) for n in windows]
  assert max(windows) >= 8
  texts = [t.decode("utf-8") for t in served[ss.ANSWER_TEXT].numpy()]
  for i, context in enumerate(contexts):
    if not context:
      assert not served[ss.HAS_ANSWER][i] and f"q{i}" not in predicted.predictions
      continue
    evaluated = predicted.predictions[f"q{i}"]
    if evaluated == "empty":
      # Evaluation's placeholder when no candidate span is left: served as no answer.
      assert not served[ss.HAS_ANSWER][i] and texts[i] == ""
      continue
    assert texts[i] == evaluated, i
    start, end = served[ss.ANSWER_START][i], served[ss.ANSWER_END][i]
    assert context[start:end] == texts[i]
  # Answers past the first window are found.
  assert any(served[ss.WINDOW_INDEX].numpy() > 0)


def test_served_score_is_the_best_nbest_logit_sum(squad_module):
  config, module = squad_module
  contexts = _contexts()[:6]
  served = module.predict_text({"question": tf.constant(QUESTIONS[:6]),
                                "context": tf.constant(contexts)})
  predicted, _ = evaluated_answers(module, config, contexts, QUESTIONS[:6])
  for i in range(6):
    best = predicted.nbest[f"q{i}"][0]
    np.testing.assert_allclose(served[ss.SCORE][i], best["start_logit"] + best["end_logit"],
                               rtol=1e-5)


def test_squad2_null_answer_follows_the_evaluation(tmp_path):
  task = dict(SQUAD, version_2_with_negative=True, null_score_diff_threshold=0.0)
  vocab = helpers.write_vocab(tmp_path)
  config = helpers.experiment(vocab, task, seq_length=SEQ_LENGTH)
  module = exporter.build_serving_module(config, helpers.build_model(config, seed=11), vocab)
  contexts, questions = _contexts()[:6], QUESTIONS[:6]
  served = module.predict_text({"question": tf.constant(questions),
                                "context": tf.constant(contexts)})
  predicted, _ = evaluated_answers(module, config, contexts, questions, version_2=True)
  texts = [t.decode("utf-8") for t in served[ss.ANSWER_TEXT].numpy()]
  assert texts == [predicted.predictions[f"q{i}"] for i in range(6)]
  odds = np.array([predicted.null_odds[f"q{i}"] for i in range(6)])
  # No candidate span among the n-best starts and ends: evaluation's odds are its
  # sentinel, and the served score is 0 with no answer.
  no_span = odds == squad_postprocess.NO_SPAN_NULL_ODDS
  assert not any(served[ss.HAS_ANSWER].numpy()[no_span])
  assert not any(served[ss.SCORE].numpy()[no_span])
  assert not all(no_span)
  np.testing.assert_allclose((served[ss.NULL_SCORE] - served[ss.SCORE]).numpy()[~no_span],
                             odds[~no_span], rtol=1e-4, atol=1e-4)
