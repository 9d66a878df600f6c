"""The TF Hub-style preprocessor and encoder SavedModels, each loaded alone."""

import os

import numpy as np
import pytest
import tensorflow as tf

import export_helpers as helpers
from bert_tf import constants
from bert_tf.export import hub
from bert_tf.export import query
from bert_tf.export import serving_ops_check
from bert_tf.export import text_encoding
from bert_tf.text.tokenizer import BertWordPieceTokenizer
from bert_tf.utils import errors


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("hub")
  vocab = helpers.write_vocab(tmp / "vocab")
  config = helpers.experiment(vocab)
  model = helpers.build_model(config)
  paths = hub.export_hub_pair(model.encoder, vocab, str(tmp / "hub"), seq_length=16,
                              pretrainer=model)
  encoder = text_encoding.TextEncoder(BertWordPieceTokenizer(vocab, lower_case=True), 16)
  return {"paths": paths, "model": model, "text_encoder": encoder,
          "preprocessor": tf.saved_model.load(paths[hub.PREPROCESSOR]),
          "encoder": tf.saved_model.load(paths[hub.ENCODER])}


def test_preprocessor_call_matches_in_process_packing(pair):
  texts = tf.constant(helpers.BAD_TEXTS)
  got = pair["preprocessor"](texts)
  want = pair["text_encoder"].encode(texts)
  for name in constants.ENCODER_INPUTS:
    np.testing.assert_array_equal(got[name], want[name])


def test_tokenize_then_pack_two_segments_gives_pair_types(pair):
  pre = pair["preprocessor"]
  a, b = pre.tokenize(tf.constant(["the cat"])), pre.tokenize(tf.constant(["a dog ran"]))
  assert isinstance(a, tf.RaggedTensor) and a.dtype == tf.int32 and a.ragged_rank == 2
  packed = pre.bert_pack_inputs([a, b], 16)
  np.testing.assert_array_equal(packed[constants.INPUT_TYPE_IDS][0, :8],
                                [0, 0, 0, 0, 1, 1, 1, 1])
  assert packed[constants.INPUT_WORD_IDS].shape == (1, 16)


def test_encoder_outputs_match_the_keras_encoder(pair):
  inputs = pair["text_encoder"].encode(tf.constant(["the cat sat", "hello"]))
  got = pair["encoder"](inputs)
  want = pair["model"].encoder(inputs)
  for name in (constants.POOLED_OUTPUT, constants.SEQUENCE_OUTPUT):
    np.testing.assert_allclose(got[name], want[name], atol=1e-5)
  assert len(got[constants.ENCODER_OUTPUTS]) == 2


def test_mlm_sub_object_matches_the_pretrainer(pair):
  inputs = dict(pair["text_encoder"].encode(tf.constant(["the [MASK] sat"])))
  inputs[constants.MASKED_LM_POSITIONS] = tf.constant([[2, 3]], tf.int32)
  got = pair["encoder"].mlm(inputs)[constants.MLM_LOGITS]
  want = pair["model"](inputs)[constants.MLM_LOGITS]
  np.testing.assert_allclose(got, want, atol=1e-5)


def test_hub_pair_uses_only_allowlisted_ops(pair):
  for path in pair["paths"].values():
    assert serving_ops_check.unexpected_ops(path) == set()


def test_query_asks_the_pair_through_its_preprocessor(pair):
  export = query.load(os.path.dirname(pair["paths"][hub.ENCODER]))
  assert (export.kind, export.inputs) == ("hub", ("text",))
  (answer,) = query.ask(export, ["the cat sat"])
  want = pair["model"].encoder(pair["text_encoder"].encode(tf.constant(["the cat sat"])))
  np.testing.assert_allclose(answer[constants.POOLED_OUTPUT],
                             want[constants.POOLED_OUTPUT][0], atol=1e-5)
  assert query.describe(answer)[1].startswith("  pooled_output [32]: ")


def _tree(folder):
  """{relative path: bytes} of every file under `folder`."""
  out = {}
  for directory, _, names in os.walk(folder):
    for name in names:
      path = os.path.join(directory, name)
      with open(path, "rb") as f:
        out[os.path.relpath(path, folder)] = f.read()
  return out


def test_a_failing_hub_export_leaves_no_partial_folder_and_an_earlier_pair_intact(
    pair, tmp_path, monkeypatch):
  earlier = os.path.dirname(pair["paths"][hub.ENCODER])
  before, beside = _tree(earlier), sorted(os.listdir(os.path.dirname(earlier)))
  model = pair["model"]

  def failing_encoder(*args):
    raise RuntimeError("encoder failed")

  monkeypatch.setattr(hub.hub_encoder, "HubEncoder", failing_encoder)
  vocab = helpers.write_vocab(tmp_path / "vocab")
  with pytest.raises(RuntimeError, match="encoder failed"):
    hub.export_hub_pair(model.encoder, vocab, str(tmp_path / "new"), seq_length=16)
  assert os.listdir(tmp_path) == ["vocab"]  # neither the pair nor a temporary
  with pytest.raises(RuntimeError, match="encoder failed"):
    hub.export_hub_pair(model.encoder, vocab, earlier, seq_length=16)
  assert _tree(earlier) == before
  assert sorted(os.listdir(os.path.dirname(earlier))) == beside


def test_hub_dir_holding_other_files_is_refused_before_anything_is_written(pair, tmp_path):
  (tmp_path / "notes.txt").write_text("mine")
  with pytest.raises(errors.OutputExistsError, match="notes.txt"):
    hub.export_hub_pair(pair["model"].encoder, "unused", str(tmp_path), seq_length=16)
  assert os.listdir(tmp_path) == ["notes.txt"]
