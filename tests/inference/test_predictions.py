"""Predictions (bert_tf.inference.predictions): outputs by attribute, key and row,
strings as str, batches joined with their inner axes padded as the exports pad them,
and the readings of each kind as lists; importing bert_tf.inference loads no framework."""

import subprocess
import sys

import numpy as np
import pytest

import paths

from bert_tf.inference import predictions as p


def test_batches_of_several_entity_counts_join_padded_as_the_export_pads():
  first = p.to_numpy({"entity_count": np.array([1]), "entity_types": np.array([[b"PER"]]),
                      "entity_start": np.array([[0]], np.int32),
                      "score": np.array([[0.5]], np.float32)})
  second = p.to_numpy({"entity_count": np.array([2, 0]),
                       "entity_types": np.array([[b"LOC", b"PER"], [b"", b""]]),
                       "entity_start": np.array([[3, 7], [-1, -1]], np.int32),
                       "score": np.array([[0.1, 0.2], [0.0, 0.0]], np.float32)})
  joined = p.concatenate([first, second])
  assert joined["entity_types"].tolist() == [["PER", ""], ["LOC", "PER"], ["", ""]]
  assert joined["entity_start"].tolist() == [[0, -1], [3, 7], [-1, -1]]
  assert joined["score"][0].tolist() == [0.5, 0.0]
  assert isinstance(joined["entity_types"][0, 0], str)


def test_outputs_read_by_attribute_key_and_row_and_an_unknown_one_names_the_outputs():
  out = p.Predictions("classifier", p.to_numpy({
      "logits": np.array([[1.0, 2.0], [3.0, 0.0]], np.float32),
      "label_names": np.array([b"pos", b"neg"])}))
  assert len(out) == 2 and out.labels == ["pos", "neg"]
  assert out.logits is out["logits"]
  assert out[1] == {"logits": pytest.approx([3.0, 0.0]), "label_names": "neg"}
  with pytest.raises(AttributeError, match=r"classifier model has no output 'tokens'; its "
                     r"outputs: label_names, logits"):
    out.tokens  # pylint: disable=pointless-statement


def test_each_kind_reads_as_lists_of_its_rows():
  tagging = p.Predictions("tagging", p.to_numpy({
      "entity_count": np.array([1, 0]), "entity_types": np.array([[b"PER"], [b""]]),
      "entity_text": np.array([[b"john"], [b""]]),
      "entity_start": np.array([[0], [-1]]), "entity_end": np.array([[4], [-1]])}))
  assert tagging.entities == [[{"type": "PER", "text": "john", "start": 0, "end": 4}], []]
  fill = p.Predictions("fill_mask", p.to_numpy({
      "mask_count": np.array([2, 0]),
      "top_k_tokens": np.array([[[b"a", b"b"], [b"c", b"d"]], [[b"", b""], [b"", b""]]])}))
  assert fill.tokens == [[["a", "b"], ["c", "d"]], []]
  squad = p.Predictions("squad", p.to_numpy({
      "answer_text": np.array([b"paris", b""]), "answer_start": np.array([3, -1]),
      "answer_end": np.array([8, -1]), "score": np.array([1.5, 0.0]),
      "has_answer": np.array([True, False])}))
  assert squad.answers == [
      {"answer": "paris", "start": 3, "end": 8, "score": 1.5, "has_answer": True},
      {"answer": "", "start": -1, "end": -1, "score": 0.0, "has_answer": False}]


def test_importing_the_inference_package_loads_no_framework():
  """Its heads (every kind's) import neither TensorFlow nor Keras nor a backend until a
  model is loaded."""
  code = ("import sys, bert_tf.inference; print(sorted(m for m in "
          "('tensorflow', 'keras', 'jax', 'torch') if m in sys.modules))")
  result = subprocess.run([sys.executable, "-c", code], cwd=paths.ROOT, capture_output=True,
                          text=True, timeout=120, check=True)
  assert result.stdout.strip() == "[]"
