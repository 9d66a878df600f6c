"""A bf16 export written, reloaded and served: the float32 export's signatures and
answers, TF Serving's ops, half the weight bytes."""

import os

import numpy as np
import tensorflow as tf

import export_helpers as helpers
from bert_tf.export import exporter
from bert_tf.export import query
from bert_tf.export import serving_ops_check

MNLI = {"name": "sentence_prediction", "glue_task": "mnli"}


def _variable_bytes(export_dir):
  return sum(os.path.getsize(path) for path in tf.io.gfile.glob(
      os.path.join(export_dir, "variables", "variables.data-*")))


def test_bfloat16_export_serves_what_float32_serves_with_allowlisted_ops(tmp_path):
  vocab = helpers.write_vocab(tmp_path)
  config = helpers.experiment(vocab, MNLI)
  model = helpers.build_model(config)
  checkpoint = helpers.save_checkpoint(model, tmp_path / "ckpt")
  paths = {mode: exporter.export_from_checkpoint(
      checkpoint, config, str(tmp_path / (mode or "float32")), quantize_mode=mode)
           for mode in (None, exporter.BFLOAT16)}
  assert not serving_ops_check.unexpected_ops(paths[exporter.BFLOAT16])
  loaded = {mode: tf.saved_model.load(path) for mode, path in paths.items()}
  assert sorted(loaded[None].signatures) == sorted(loaded[exporter.BFLOAT16].signatures)
  for key, signature in loaded[None].signatures.items():
    converted = loaded[exporter.BFLOAT16].signatures[key]
    assert converted.structured_input_signature == signature.structured_input_signature
    assert ({k: v.dtype for k, v in converted.structured_outputs.items()}
            == {k: v.dtype for k, v in signature.structured_outputs.items()})
  texts = tf.constant(["the cat sat on the mat", "hello world", ""])
  pair = tf.constant(["a dog ran", "", "what is good"])
  served = {mode: {k: v.numpy() for k, v in
                   saved.signatures["serving_default"](text=texts, text_b=pair).items()}
            for mode, saved in loaded.items()}
  assert sorted(served[None]) == sorted(served[exporter.BFLOAT16])
  for key, value in served[None].items():
    got = served[exporter.BFLOAT16][key]
    assert got.dtype == value.dtype
    if value.dtype.kind == "f":
      np.testing.assert_allclose(got, value, atol=0.02)
  # Every weight but LayerNorm's (2 * 5 * 32 values here) in 2 bytes instead of 4.
  params = sum(int(np.prod(w.shape)) for w in model.weights)
  saved_bytes = _variable_bytes(paths[None]) - _variable_bytes(paths[exporter.BFLOAT16])
  assert abs(saved_bytes - 2 * (params - 2 * 5 * 32)) <= 0.01 * 2 * params
  # The query path reads it as it reads the float32 export.
  rows = ["the cat sat", "a dog ran", "hello world", ""]  # two (text, text_b) pairs
  answers = {mode: query.ask(query.load(path), rows) for mode, path in paths.items()}
  assert [a["kind"] for a in answers[exporter.BFLOAT16]] == ["classifier"] * 2
  assert ([sorted(a) for a in answers[exporter.BFLOAT16]]
          == [sorted(a) for a in answers[None]])
