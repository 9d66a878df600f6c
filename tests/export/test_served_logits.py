"""Every export's serve_token_ids gives the model's logits beside its probabilities (so
that an export compares with transformers' logits) and takes rows of any length up to
its seq_length, shorter ones than SQuAD's n_best_size included; in-process signatures,
as the SavedModel holds them (tests/export/test_export.py reloads one)."""

import numpy as np
import pytest
import tensorflow as tf

import export_helpers as helpers
from bert_tf import constants
from bert_tf.export import classifier_serving as cs
from bert_tf.export import exporter
from bert_tf.export import fill_mask_serving as fm
from bert_tf.export import squad_serving as ss
from bert_tf.export import tagging_serving as ts

# Shorter than SQuAD's default n_best_size (20), which TopKV2 once took as k; the longest.
WIDTHS = (5, 16, helpers.SEQ_LENGTH)


@pytest.fixture(name="vocab", scope="module")
def fixture_vocab(tmp_path_factory):
  return helpers.write_vocab(tmp_path_factory.mktemp("logits"))


def _served(vocab, family):
  config = helpers.experiment(vocab, helpers.TASK_SECTIONS[family])
  module = exporter.build_serving_module(config, helpers.build_model(config), vocab)
  return module, module.token_ids_signature()


def _inputs(width, mask_id=None):
  """Token ids [2, width], the second row with 2 padding positions; [MASK] at 1."""
  rng = np.random.default_rng(width)
  ids = rng.integers(5, 40, (2, width)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, width - 2:] = 0
  types = np.zeros_like(ids)
  types[:, width // 2:] = 1  # SQuAD's context
  if mask_id is not None:
    ids[:, min(1, width - 1)] = mask_id
  return {constants.INPUT_WORD_IDS: ids * mask, constants.INPUT_MASK: mask,
          constants.INPUT_TYPE_IDS: types * mask}


def _call(signature, inputs):
  return {k: v.numpy() for k, v in signature(
      **{k: tf.constant(v) for k, v in inputs.items()}).items()}


def _softmax(logits):
  e = np.exp(logits - logits.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("family", ["mnli", "tagging"])
def test_classifier_and_tagger_serve_the_models_logits_and_their_softmax(vocab, family):
  module, signature = _served(vocab, family)
  for width in WIDTHS:
    inputs = _inputs(width)
    out = _call(signature, inputs)
    logits = np.asarray(module.call_model(inputs)[cs.LOGITS])
    np.testing.assert_allclose(out[cs.LOGITS], logits, atol=1e-5)
    np.testing.assert_allclose(out[cs.PROBABILITIES], _softmax(logits), atol=1e-6)
    np.testing.assert_array_equal(out[ts.LABEL_IDS if family == "tagging" else cs.LABEL_IDS],
                                  logits.argmax(-1))


def test_squad_serves_start_and_end_logits_and_the_best_span_of_rows_of_any_length(vocab):
  module, signature = _served(vocab, "squad")
  assert module.n_best_size == 20 and module.n_best_size > WIDTHS[0]
  for width in WIDTHS:
    inputs = _inputs(width)
    out = _call(signature, inputs)
    model_out = module.call_model(inputs)
    start = np.asarray(model_out[ss.START_LOGITS])
    end = np.asarray(model_out[ss.END_LOGITS])
    np.testing.assert_allclose(out[ss.START_LOGITS], start, atol=1e-5)
    np.testing.assert_allclose(out[ss.END_LOGITS], end, atol=1e-5)
    for row in range(2):
      # Every position is a candidate where n_best_size >= width: the best context span.
      length = inputs[constants.INPUT_MASK][row].sum()
      context = [p for p in range(width) if p >= width // 2 and p < length - 1]
      spans = [(start[row, s] + end[row, e], s, e) for s in context for e in context
               if 0 <= e - s < module.max_answer_length]
      if width >= module.n_best_size:
        continue  # the n_best_size best positions only
      assert bool(out[ss.HAS_ANSWER][row]) == bool(spans)
      if spans:
        best = max(spans, key=lambda span: span[0])
        assert out[ss.SCORE][row] == pytest.approx(best[0], abs=1e-5)
        assert (int(out[ss.START_INDEX][row]), int(out[ss.END_INDEX][row])) == best[1:]


def test_fill_mask_serves_the_logits_of_its_top_k_tokens(vocab):
  module, signature = _served(vocab, "pretraining")
  for width in WIDTHS:
    inputs = _inputs(width, module.text_encoder.mask_id)
    out = _call(signature, inputs)
    positions = np.asarray(out[fm.MASK_POSITIONS])
    logits = np.asarray(module.model(
        {**inputs, constants.MASKED_LM_POSITIONS: positions},
        training=False)[constants.MLM_LOGITS])
    ids = np.asarray(out[fm.TOP_K_IDS])
    count = np.asarray(out[fm.MASK_COUNT])
    assert count.tolist() == [1, 1]
    top = np.take_along_axis(logits, ids, -1)[:, :1]
    np.testing.assert_allclose(out[fm.TOP_K_LOGITS][:, :1], top, atol=1e-5)
    np.testing.assert_allclose(out[fm.TOP_K_PROBABILITIES][:, :1],
                               np.take_along_axis(_softmax(logits), ids, -1)[:, :1],
                               atol=1e-6)
    assert not np.asarray(out[fm.TOP_K_LOGITS])[:, 1:].any()  # padding masks: zeros
