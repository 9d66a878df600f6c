"""Inference on the JAX backend without TensorFlow (bert_tf.inference's route through
Hugging Face tokenizers and NumPy heads) answers as the TensorFlow route does, whose
tokenizing and outputs are the export's: a classifier run, a converted classifier and a
pretraining run's fill-mask, in tests/inference_tf_free_check.py in a subprocess (this
process holds TensorFlow). A kind served only with TensorFlow is refused in one line."""

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
from bert_tf.inference import load

pytestmark = pytest.mark.slow  # a JAX process: about 30 s


@pytest.fixture(name="asked", scope="module")
def fixture_asked(tmp_path_factory):
  """(cases, refused folders, the JSON line of the check, its outputs by case)."""
  directory = tmp_path_factory.mktemp("tf_free")
  classifier, model = ih.write_run(directory / "mnli", "mnli")
  vocab = export_helpers.write_vocab(directory)
  writing.save_huggingface(model, vocab, str(directory / "hf"))
  convert.convert_checkpoint(str(directory / "hf"), str(directory / "converted"))
  squad, _ = ih.write_run(directory / "squad", "squad")
  cases = {"classifier": {"path": classifier, "rows": ih.PAIRS},
           "converted": {"path": str(directory / "converted"),
                         "rows": [" ".join(pair) for pair in ih.PAIRS]},
           "fill_mask": {"path": ih.write_run(directory / "pretraining", "pretraining")[0],
                         "rows": ih.MASKED}}
  with open(directory / "cases.json", "w", encoding="utf-8") as f:
    json.dump({**cases, "refused": [squad]}, f)
  env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=paths.ROOT)
  result = subprocess.run(
      [sys.executable, os.path.join(paths.ROOT, "tests", "inference_tf_free_check.py"),
       str(directory / "cases.json"), str(directory)], env=env, capture_output=True,
      text=True, timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-4000:]
  found = json.loads(result.stdout.strip().splitlines()[-1])
  outputs = {case: dict(np.load(directory / f"{case}.npz")) for case in cases}
  return cases, squad, found, outputs


def test_the_jax_route_runs_without_tensorflow(asked):
  _, _, found, _ = asked
  assert found["tensorflow_absent"] is True and found["backend"] == "jax"
  assert found["kinds"] == {"classifier": "classifier", "converted": "classifier",
                            "fill_mask": "fill_mask"}


@pytest.mark.parametrize("case", ["classifier", "converted", "fill_mask"])
def test_every_output_equals_the_tensorflow_routes(asked, case):
  cases, _, _, outputs = asked
  expected = load(cases[case]["path"]).predict(cases[case]["rows"]).outputs
  got = outputs[case]
  assert set(got) == set(expected)
  for name, value in expected.items():
    if value.dtype == object:
      assert got[name].tolist() == value.tolist(), name
    else:
      np.testing.assert_allclose(got[name], value, atol=1e-4, err_msg=name)
  logits = expected.get("logits", expected.get("top_k_logits"))
  assert np.ptp(logits) > 0.1  # outputs that tell rows apart


def test_a_kind_served_only_with_tensorflow_is_refused_in_one_line(asked):
  _, squad, found, _ = asked
  assert found["refused"] == {squad: (
      "A squad model answers raw text on the TensorFlow backend or from its export; on "
      "the jax backend the predictor serves classifier, fill_mask")}
