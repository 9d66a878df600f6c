"""Inference on the JAX and torch backends without TensorFlow (bert_tf.inference's route
through Hugging Face tokenizers and NumPy heads) answers as the TensorFlow route does,
whose tokenizing and outputs are the export's: every kind (a classifier run, a classifier
converted from Hugging Face, one converted from KerasHub there, fill-mask, SQuAD 2.0 and
a tagger over several windows, multiple choice), in tests/inference_tf_free_check.py in
a subprocess per backend (this process holds TensorFlow), two rows a batch. A kind
without a head there is refused in one line."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import export_helpers
import inference_runs as ih
import keras_hub_presets
import paths
from bert_tf.checkpoints import convert
from bert_tf.checkpoints import writing
from bert_tf.inference import host_heads
from bert_tf.inference import Predictions
from bert_tf.inference import load
from bert_tf.utils import errors

pytestmark = pytest.mark.slow  # a JAX and a torch process: about 40 s

BACKENDS = ["jax", "torch"]
CASES = ["classifier", "converted", "keras_hub", "fill_mask", "squad", "tagging",
         "multiple_choice"]


@pytest.fixture(name="asked", scope="module")
def fixture_asked(tmp_path_factory):
  """(cases, {backend: the check's JSON line}, {backend: {case: outputs}}, {case: the
  TensorFlow route's outputs})."""
  directory = tmp_path_factory.mktemp("tf_free")
  classifier, model = ih.write_run(directory / "mnli", "mnli")
  vocab = export_helpers.write_vocab(directory)
  writing.save_huggingface(model, vocab, str(directory / "hf"))
  convert.convert_checkpoint(str(directory / "hf"), str(directory / "converted"))
  runs = {"squad": (ih.write_run(directory / "squad", "squad", **ih.LONG_SQUAD_TASK),
                    ih.LONG_SQUAD),
          "tagging": (ih.write_run(directory / "tagging", "tagging", seed=4,
                                         **ih.LONG_TAGGING_TASK),
                      ih.TAGGED),
          "multiple_choice": (ih.write_run(directory / "choice", "multiple_choice",
                                           num_choices=3), ih.CHOICES)}
  (directory / "keras_hub").mkdir()
  keras_hub_presets.save_preset("classifier", directory / "keras_hub")
  cases = {"classifier": {"path": classifier, "rows": ih.PAIRS},
           "keras_hub": {"convert": str(directory / "keras_hub" / "preset"),
                         "rows": [" ".join(pair) for pair in ih.PAIRS]},
           "converted": {"path": str(directory / "converted"),
                         "rows": [" ".join(pair) for pair in ih.PAIRS]},
           "fill_mask": {"path": ih.write_run(directory / "pretraining", "pretraining")[0],
                         "rows": ih.MASKED},
           **{case: {"path": run[0], "rows": rows} for case, (run, rows) in runs.items()}}
  with open(directory / "cases.json", "w", encoding="utf-8") as f:
    json.dump(cases, f)
  checks = {}
  for backend in BACKENDS:  # side by side
    (directory / backend).mkdir()
    env = dict(os.environ, KERAS_BACKEND=backend, JAX_PLATFORMS="cpu", PYTHONPATH=paths.ROOT)
    checks[backend] = subprocess.Popen(
        [sys.executable, os.path.join(paths.ROOT, "tests", "inference_tf_free_check.py"),
         str(directory / "cases.json"), str(directory / backend)], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  found, outputs = {}, {}
  for backend, check in checks.items():
    stdout, stderr = check.communicate(timeout=600)
    assert check.returncode == 0, stderr[-4000:]
    found[backend] = json.loads(stdout.strip().splitlines()[-1])
    outputs[backend] = {case: dict(np.load(directory / backend / f"{case}.npz"))
                        for case in cases}
  cases["keras_hub"]["path"] = str(directory / "jax" / "keras_hub")  # converted there
  expected = {case: load(spec["path"]).predict(spec["rows"]).outputs
              for case, spec in cases.items()}
  return cases, found, outputs, expected


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_route_runs_without_tensorflow(asked, backend):
  found = asked[1]
  assert found[backend]["tensorflow_absent"] is True
  assert found[backend]["backend"] == backend
  assert found[backend]["kinds"] == {
      "classifier": "classifier", "converted": "classifier", "keras_hub": "classifier",
      "fill_mask": "fill_mask",
      "squad": "squad", "tagging": "tagging", "multiple_choice": "multiple_choice"}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES)
def test_every_output_equals_the_tensorflow_routes(asked, case, backend):
  expected, got = asked[3][case], asked[2][backend][case]
  assert set(got) == set(expected)
  for name, value in expected.items():
    assert got[name].shape == value.shape, name
    if value.dtype == object:
      assert got[name].tolist() == value.tolist(), name
    else:
      np.testing.assert_allclose(got[name], value, atol=1e-4, err_msg=name)
  logits = expected.get("logits", expected.get("top_k_logits", expected.get("start_logits")))
  if logits is not None:
    assert np.ptp(logits) > 0.1  # outputs that tell rows apart


def test_the_rows_cover_what_they_are_for_and_answers_are_spans_of_their_text(asked):
  """Several windows, answers and none, entities of several words; each answer and
  entity the characters of the text it names, a span's score its logits' sum."""
  cases, expected = asked[0], asked[3]
  squad = Predictions("squad", expected["squad"])
  tagging = Predictions("tagging", expected["tagging"])
  assert squad.num_windows.max() > 1 and tagging.num_windows.max() > 1
  assert squad.has_answer.any() and not squad.has_answer[3]  # the empty context
  for row, ((_, context), answer) in enumerate(zip(cases["squad"]["rows"], squad.answers)):
    if answer["has_answer"]:
      assert context[answer["start"]:answer["end"]] == answer["answer"] != ""
      assert answer["score"] == pytest.approx(
          squad.start_logits[row, squad.start_index[row]]
          + squad.end_logits[row, squad.end_index[row]], abs=1e-4)
  assert tagging.entity_count.sum() > 2 and tagging.entity_count[2] == 0
  assert any(" " in e["text"] for row in tagging.entities for e in row)
  for text, row in zip(cases["tagging"]["rows"], tagging.entities):
    assert all(text[e["start"]:e["end"]] == e["text"] for e in row)
  assert len(expected["multiple_choice"]["chosen_ending"]) == len(ih.CHOICES)


def test_a_kind_without_a_head_is_refused_in_one_line():
  with pytest.raises(errors.InputError) as raised:
    host_heads.check_served("encoder", "jax")
  assert str(raised.value) == (
      "encoder models answer raw text on the TensorFlow backend or from their export; on "
      "the jax backend the predictor serves classifier, fill_mask, multiple_choice, squad, "
      "tagging")
