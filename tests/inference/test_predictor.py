"""Inference from Python on the TensorFlow backend (bert_tf.inference): a run, a converted
checkpoint folder and an export each answer raw text with the model's logits,
probabilities and labels (fill-mask tokens), batched, equal to what the model computes
on the export's encoding of the texts; the route without TensorFlow, and SQuAD's and a
tagger's answers on both routes, are test_predictor_jax.py's."""

import os

import numpy as np
import pytest
import tensorflow as tf

import export_helpers
import inference_runs as ih
from bert_tf import constants
from bert_tf.checkpoints import convert
from bert_tf.checkpoints import writing
from bert_tf.export import exporter
from bert_tf.export import text_encoding
from bert_tf.inference import Predictor
from bert_tf.inference import load
from bert_tf.text.tokenizer import BertWordPieceTokenizer
from bert_tf.utils import errors

MNLI_LABELS = ["contradiction", "entailment", "neutral"]


@pytest.fixture(name="classifier_run", scope="module")
def fixture_classifier_run(tmp_path_factory):
  return ih.write_run(tmp_path_factory.mktemp("runs") / "mnli", "mnli")


@pytest.fixture(name="predictor", scope="module")
def fixture_predictor(classifier_run):
  return Predictor.from_run(classifier_run[0])


def encoded(vocab_file, rows, seq_length=export_helpers.SEQ_LENGTH):
  """The export's encoding of texts or text pairs: int32 [B, T] inputs."""
  encoder = text_encoding.TextEncoder(BertWordPieceTokenizer(vocab_file, True), seq_length)
  if isinstance(rows[0], str):
    return encoder.encode(tf.constant(rows))
  return encoder.encode(tf.constant([a for a, _ in rows]), tf.constant([b for _, b in rows]))


def softmax(logits):
  e = np.exp(logits - logits.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def test_a_run_answers_text_pairs_with_its_models_logits_probabilities_and_labels(
    classifier_run, predictor):
  run, model = classifier_run
  assert (predictor.kind, predictor.inputs) == ("classifier", ("text", "text_b"))
  out = predictor.predict(ih.PAIRS, batch_size=2)
  expected = np.asarray(model(encoded(os.path.join(run, "vocab.txt"), ih.PAIRS),
                              training=False)["logits"])
  np.testing.assert_allclose(out.logits, expected, atol=1e-5)
  np.testing.assert_allclose(out.probabilities, softmax(expected), atol=1e-6)
  assert out.labels == [MNLI_LABELS[i] for i in expected.argmax(-1)]
  assert np.ptp(out.logits, axis=0).max() > 0.1 and len(out) == len(ih.PAIRS)
  assert out.truncated_tokens[3] > 0 == out.truncated_tokens[0]
  # One batch or several, a dict of columns or rows: the same answer.
  whole = predictor({"text": [a for a, _ in ih.PAIRS], "text_b": [b for _, b in ih.PAIRS]})
  np.testing.assert_allclose(whole["logits"], out.logits, atol=1e-6)
  assert out[1]["label_names"] == out.labels[1]


@pytest.mark.slow  # a SavedModel written and read: 12 s
def test_an_export_answers_as_the_run_it_was_exported_from(classifier_run, predictor,
                                                           tmp_path):
  run, _ = classifier_run
  path = exporter.export_from_checkpoint(run, os.path.join(run, "params.yaml"),
                                         str(tmp_path / "exports"))
  from_export = load(str(tmp_path / "exports")).predict(ih.PAIRS, batch_size=3)
  from_run = predictor.predict(ih.PAIRS)
  assert os.path.basename(path) == "1" and from_export.kind == "classifier"
  assert set(from_export.outputs) == set(from_run.outputs)
  for name, value in from_run.outputs.items():
    if value.dtype == object:
      assert from_export[name].tolist() == value.tolist(), name
    else:
      np.testing.assert_allclose(from_export[name], value, atol=1e-5, err_msg=name)


def test_a_converted_checkpoint_answers_as_the_model_it_was_converted_from(
    classifier_run, tmp_path):
  _, model = classifier_run
  vocab = export_helpers.write_vocab(tmp_path)
  writing.save_huggingface(model, vocab, str(tmp_path / "hf"))
  convert.convert_checkpoint(str(tmp_path / "hf"), str(tmp_path / "converted"))
  assert any(name.endswith(".h5") for name in os.listdir(tmp_path / "converted"))
  # A converted classifier reads single texts: its params.yaml names no pair column.
  texts = [" ".join(pair) for pair in ih.PAIRS]
  out = load(str(tmp_path / "converted")).predict(texts)
  expected = np.asarray(model(encoded(vocab, texts, 64), training=False)["logits"])
  np.testing.assert_allclose(out.logits, expected, atol=1e-5)
  assert out.label_ids.tolist() == expected.argmax(-1).tolist()


def test_a_pretraining_run_fills_each_mask_with_its_top_k_tokens(tmp_path):
  run, model = ih.write_run(tmp_path / "pretraining", "pretraining")
  out = Predictor.from_run(run, top_k=4).predict(ih.MASKED, batch_size=2)
  marks = [text.count(constants.MASK_TOKEN) for text in ih.MASKED]
  assert [len(row) for row in out.tokens] == [min(m, 3) for m in marks]  # max_masks 3
  assert out.masks_dropped.tolist() == [m - min(m, 3) for m in marks]
  assert all(len(candidates) == 4 for row in out.tokens for candidates in row)
  # The logits of the first [MASK]: the model's at its position, best first.
  tokenizer = BertWordPieceTokenizer(os.path.join(run, "vocab.txt"), True)
  inputs = text_encoding.TextEncoder(tokenizer, export_helpers.SEQ_LENGTH).encode_with_masks(
      tf.constant(ih.MASKED[:1]))
  ids = inputs[constants.INPUT_WORD_IDS][0].numpy()
  position = int(np.flatnonzero(ids == tokenizer.mask_id)[0])
  logits = np.asarray(model({**inputs, constants.MASKED_LM_POSITIONS: tf.constant(
      [[position, 0, 0]])}, training=False)[constants.MLM_LOGITS])[0, 0]
  np.testing.assert_allclose(out.top_k_logits[0, 0], np.sort(logits)[::-1][:4], atol=1e-5)
  assert out.tokens[0][0][0] == tokenizer.vocab[int(logits.argmax())]


def test_a_folder_without_params_or_texts_that_fit_no_row_are_one_line_errors(
    classifier_run, predictor, tmp_path):
  with pytest.raises(errors.MissingInputError, match=r"^No params.yaml in .*from_export"):
    Predictor.from_run(str(tmp_path))
  run = classifier_run[0]
  with pytest.raises(errors.InputError, match="^seq_length 65 exceeds max_position_embeddings"):
    Predictor.from_run(run, seq_length=65)
  small = tmp_path / "small.txt"
  small.write_text("\n".join(constants.SPECIAL_TOKENS + ("the", "cat")) + "\n")
  with pytest.raises(errors.InputError, match=r"has 7 tokens but the model's vocab_size is"):
    Predictor.from_run(run, vocab_file=str(small))
  for texts in (["one text alone"], {"text": ["a"]}, {"text": ["a"], "text_b": []}):
    with pytest.raises(errors.InputError, match=r"text, text_b") as raised:
      predictor.predict(texts)
    assert "\n" not in str(raised.value)
  with pytest.raises(AttributeError, match="no output 'start_logits'; its outputs: label_ids"):
    predictor.predict(ih.PAIRS[:1]).start_logits
