"""Inference on the JAX backend without TensorFlow (bert_tf.inference's route through
Hugging Face tokenizers and NumPy heads) answers as the TensorFlow route does, whose
tokenizing and outputs are the export's: every kind (a classifier run, a converted
classifier, fill-mask, SQuAD 2.0 and a tagger over several windows, multiple choice), in
tests/inference_tf_free_check.py in a subprocess (this process holds TensorFlow), two
rows a batch. A kind without a head there is refused in one line."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import export_helpers
import inference_runs as ih
import paths
from bert_tf.checkpoints import convert
from bert_tf.checkpoints import writing
from bert_tf.inference import host_heads
from bert_tf.inference import load
from bert_tf.utils import errors

pytestmark = pytest.mark.slow  # a JAX process: about 40 s

CASES = ["classifier", "converted", "fill_mask", "squad", "tagging", "multiple_choice"]


@pytest.fixture(name="asked", scope="module")
def fixture_asked(tmp_path_factory):
  """(cases, the JSON line of the check, its outputs by case)."""
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
  cases = {"classifier": {"path": classifier, "rows": ih.PAIRS},
           "converted": {"path": str(directory / "converted"),
                         "rows": [" ".join(pair) for pair in ih.PAIRS]},
           "fill_mask": {"path": ih.write_run(directory / "pretraining", "pretraining")[0],
                         "rows": ih.MASKED},
           **{case: {"path": run[0], "rows": rows} for case, (run, rows) in runs.items()}}
  with open(directory / "cases.json", "w", encoding="utf-8") as f:
    json.dump(cases, f)
  env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=paths.ROOT)
  result = subprocess.run(
      [sys.executable, os.path.join(paths.ROOT, "tests", "inference_tf_free_check.py"),
       str(directory / "cases.json"), str(directory)], env=env, capture_output=True,
      text=True, timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-4000:]
  found = json.loads(result.stdout.strip().splitlines()[-1])
  outputs = {case: dict(np.load(directory / f"{case}.npz")) for case in cases}
  return cases, found, outputs


def test_the_jax_route_runs_without_tensorflow(asked):
  _, found, _ = asked
  assert found["tensorflow_absent"] is True and found["backend"] == "jax"
  assert found["kinds"] == {"classifier": "classifier", "converted": "classifier",
                            "fill_mask": "fill_mask", "squad": "squad", "tagging": "tagging",
                            "multiple_choice": "multiple_choice"}


@pytest.mark.parametrize("case", CASES)
def test_every_output_equals_the_tensorflow_routes(asked, case):
  cases, _, outputs = asked
  expected = load(cases[case]["path"]).predict(cases[case]["rows"]).outputs
  got = outputs[case]
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


def test_the_rows_cover_what_they_are_for(asked):
  """Several windows, answers and none, entities, every choice's text."""
  _, _, outputs = asked
  squad, tagging = outputs["squad"], outputs["tagging"]
  assert squad["num_windows"].max() > 1 and tagging["num_windows"].max() > 1
  assert squad["has_answer"].any() and not squad["has_answer"][3]  # the empty context
  assert tagging["entity_count"].sum() > 2 and tagging["entity_count"][2] == 0
  assert any(" " in text for text in tagging["entity_text"].ravel())  # of several words
  assert len(outputs["multiple_choice"]["chosen_ending"]) == len(ih.CHOICES)


def test_a_kind_without_a_head_is_refused_in_one_line():
  with pytest.raises(errors.InputError) as raised:
    host_heads.check_served("encoder", "jax")
  assert str(raised.value) == (
      "encoder models answer raw text on the TensorFlow backend or from their export; on "
      "the jax backend the predictor serves classifier, fill_mask, multiple_choice, squad, "
      "tagging")
