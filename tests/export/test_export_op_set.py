"""The op set of exports, proven by loading: a process with only the three allowed
tensorflow-text ops runs every export (see the fresh-process tests of each kind) and
refuses one that needs another tensorflow-text op."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text

import export_helpers as helpers


class _Whitespace(tf.Module):
  """Splits text with tensorflow-text's WhitespaceTokenizer, an op outside the three."""

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def __call__(self, text):
    return {"words": tensorflow_text.WhitespaceTokenizer().tokenize(text).to_tensor("")}


@pytest.mark.slow  # an export loaded in a process
def test_an_export_needing_another_text_op_does_not_load(tmp_path):
  module = _Whitespace()
  path = str(tmp_path / "whitespace")
  tf.saved_model.save(module, path, signatures={"serving_default": module.__call__})
  result = helpers.run_fresh_process([(path, [], [])], tmp_path / "plan")[0]
  assert "WhitespaceTokenizeWithOffsets" in result["load_error"]
  assert result["modules"] == []


@pytest.mark.slow  # an export loaded in a process
def test_the_allowed_text_ops_run_without_importing_tensorflow_text(tmp_path):
  vocab = helpers.write_vocab(tmp_path)
  from bert_tf.text.tokenizer import BertWordPieceTokenizer  # pylint: disable=g-import-not-at-top

  class Tokenize(tf.Module):

    def __init__(self):
      super().__init__()
      self.tokenizer = BertWordPieceTokenizer(vocab, lower_case=True)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, text):
      return {"ids": self.tokenizer.tokenize(text).merge_dims(1, 2).to_tensor(-1)}

  module = Tokenize()
  path = str(tmp_path / "tokenize")
  tf.saved_model.save(module, path, signatures={"serving_default": module.__call__})
  texts = np.array([b"Hello, the cat!", b"unbelievable dogs"], dtype=object)
  expected = module(tf.constant(texts))
  call = helpers.call_entry("serving_default", {"text": texts}, helpers.numpy_outputs(expected))
  result = helpers.run_fresh_process([(path, [call], [])], tmp_path / "plan")[0]
  assert "load_error" not in result
  assert result["calls"][0]["outputs"]["ids"]["ok"]
  assert result["modules"] == []
