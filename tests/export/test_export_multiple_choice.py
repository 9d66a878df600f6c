"""The multiple-choice (SWAG) export: context and endings in, the choice out."""

import numpy as np
import pytest
import tensorflow as tf

import export_helpers as helpers
from bert_tf.data.pipelines import featurizers
from bert_tf.data.pipelines import loaders
from bert_tf.data.task_files import swag
from bert_tf.export import exporter
from bert_tf.export import multiple_choice_serving as mcs
from bert_tf.export import query
from bert_tf.export import serving_ops_check
from bert_tf.tasks import base

TASK = {"name": "multiple_choice", "num_choices": 3}
CONTEXTS = ["John lives in Paris .", "the dog ran", "", "Héllo, Wörld! " * 20]
ENDINGS = [["the capital of France .", "a cat sat", "who?"],
           ["in the park", "", "on the mat . " * 10],
           ["a", "b", "c"],
           ["London", "Paris", "the city"]]


def _texts():
  texts = {"context": [c.encode() for c in CONTEXTS]}
  for i in range(3):
    texts[mcs.ending_name(i)] = [e[i].encode() for e in ENDINGS]
  return texts


@pytest.fixture(scope="module")
def served(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("swag")
  vocab = helpers.write_vocab(tmp)
  config = helpers.experiment(vocab, TASK)
  module = exporter.build_serving_module(config, helpers.build_model(config), vocab)
  return config, module, tmp


def test_raw_text_gives_probabilities_over_the_choices_and_the_chosen_ending(served):
  _, module, _ = served
  out = module.predict_text({k: tf.constant(v) for k, v in _texts().items()})
  probabilities = out[mcs.PROBABILITIES].numpy()
  assert probabilities.shape == (4, 3)
  np.testing.assert_allclose(probabilities.sum(-1), 1, atol=1e-6)
  choice = out[mcs.CHOICE].numpy()
  assert choice.tolist() == probabilities.argmax(-1).tolist()
  assert [t.decode() for t in out[mcs.CHOSEN_ENDING].numpy()] == [
      ENDINGS[i][c] for i, c in enumerate(choice)]
  truncated = out[mcs.TRUNCATED_TOKENS].numpy()
  assert truncated[0] == truncated[2] == 0 and truncated[1] > 0 and truncated[3] > 0


def test_served_inputs_are_the_training_features(served):
  config, module, _ = served
  examples = [swag.MultipleChoiceExample(i, c, e, 0) for i, (c, e) in
              enumerate(zip(CONTEXTS, ENDINGS))]
  task = base.get_task(config)
  kind = loaders.get_kind(task.record_kind)
  dataset = kind.featurize(task.input_needs, examples, config.eval_data.seq_length)
  served_ids = module.encode_text({k: tf.constant(v) for k, v in _texts().items()})
  for i, features in enumerate(dataset):
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
      trained = features[name].to_tensor() if isinstance(features[name], tf.RaggedTensor) \
          else features[name]
      width = trained.shape[-1]
      np.testing.assert_array_equal(served_ids[name][i, :, :width], trained)
      assert not np.any(served_ids[name][i, :, width:])


@pytest.fixture(scope="module")
def saved(served):
  _, module, tmp = served
  return exporter.write_saved_model(module, str(tmp / "export"))


@pytest.mark.slow  # a fresh process; in-process signatures above
def test_export_runs_every_signature_in_a_fresh_process(served, saved):
  _, module, tmp = served
  path = saved
  assert serving_ops_check.unexpected_ops(path) == set()
  calls = helpers.signature_calls(module, _texts())
  result = helpers.run_fresh_process([(path, calls, helpers.rest_bodies(module, _texts()))],
                                     tmp / "plan")[0]
  helpers.assert_fresh_result_ok(result)
  assert [c["signature"] for c in result["calls"]] == [
      "serving_default", "serve_token_ids", "serve_examples"]
  assert len(result["rest"]) == 6


@pytest.mark.slow  # writes the export
def test_query_asks_a_context_and_its_endings_for_the_choice(served, saved):
  export = query.load(saved)
  assert (export.kind, export.inputs) == ("multiple_choice",
                                          ("context", "ending0", "ending1", "ending2"))
  (answer,) = query.ask(export, [CONTEXTS[0], *ENDINGS[0]])
  out = served[1].predict_text({k: tf.constant(v[:1]) for k, v in _texts().items()})
  assert answer["choice"] == int(out[mcs.CHOICE][0])
  assert answer["ending"] == ENDINGS[0][answer["choice"]]
  np.testing.assert_allclose(answer["probabilities"], out[mcs.PROBABILITIES][0], atol=1e-6)
