"""KerasHub BERT presets (BertBackbone, BertTextClassifier) convert into bert_tf and back.

Small random presets are made here with keras_hub (every bias and LayerNorm parameter
random too) and saved with save_to_preset beside their vocabulary; the converted model's
outputs equal keras_hub's within 1e-5, and the preset written back loads in keras_hub
and computes the same.
"""

import dataclasses

import numpy as np
import pytest
import yaml

keras_hub = pytest.importorskip("keras_hub")

from bert_tf import constants
from bert_tf.checkpoints import convert, reading
from bert_tf.checkpoints.files import ConversionError
from bert_tf.models.bert_classifier import BertClassifier
from bert_tf.models.bert_encoder import BertEncoder

import keras_hub_presets as presets
from checkpoint_helpers import TINY, tiny_model, token_batch, write_vocab

ATOL = 1e-5


def keras_hub_outputs(model, features):
  """keras_hub's outputs under bert_tf's names, as NumPy."""
  inputs = {"token_ids": features[constants.INPUT_WORD_IDS],
            "segment_ids": features[constants.INPUT_TYPE_IDS],
            "padding_mask": features[constants.INPUT_MASK]}
  out = model(inputs)
  if isinstance(out, dict):
    return {constants.SEQUENCE_OUTPUT: np.asarray(out["sequence_output"]),
            constants.POOLED_OUTPUT: np.asarray(out["pooled_output"])}
  return {"logits": np.asarray(out)}


def _assert_close(ours, theirs):
  for name, value in theirs.items():
    diff = float(np.abs(np.asarray(ours[name]) - value).max())
    assert diff < ATOL, f"{name}: max abs difference {diff}"


@pytest.mark.slow  # about 11 s each on a loaded 2-core machine
@pytest.mark.parametrize("kind, model_class", [("backbone", BertEncoder),
                                               ("classifier", BertClassifier)])
def test_keras_hub_preset_converts_into_bert_tf_and_back_with_equal_outputs(
    tmp_path, kind, model_class):
  model = presets.save_preset(kind, tmp_path)
  features = token_batch(seed=1)
  want = keras_hub_outputs(model, features)

  summary = convert.convert_checkpoint(str(tmp_path / "preset"), str(tmp_path / "ours"))
  assert summary.input_format == "keras_hub"
  loaded = reading.read_checkpoint(str(tmp_path / "ours"))
  assert isinstance(loaded.model, model_class)
  assert loaded.encoder_config.hidden_activation == "gelu_approximate"
  _assert_close(loaded.model(features), want)
  assert ((tmp_path / "ours" / "vocab.txt").read_text()
          == (tmp_path / "vocab.txt").read_text())
  if kind == "classifier":
    params = yaml.safe_load((tmp_path / "ours" / "params.yaml").read_text())
    assert params["task"]["name"] == "sentence_prediction"
    assert params["task"]["num_classes"] == presets.NUM_CLASSES

  convert.convert_checkpoint(str(tmp_path / "ours"), str(tmp_path / "back"),
                             output_format="keras_hub")
  if kind == "backbone":
    back = keras_hub.models.BertBackbone.from_preset(str(tmp_path / "back"))
  else:
    back = keras_hub.models.BertTextClassifier.from_preset(str(tmp_path / "back"))
  _assert_close(keras_hub_outputs(back, features), want)
  tokenizer = keras_hub.models.BertTokenizer.from_preset(str(tmp_path / "back"))
  assert tokenizer.get_vocabulary() == presets.vocabulary(tmp_path)


def test_encoder_of_another_activation_is_refused_for_keras_hub_naming_both(tmp_path):
  model = tiny_model(heads=False)  # exact GELU, which KerasHub's BERT does not compute
  from bert_tf.checkpoints import writing  # pylint: disable=g-import-not-at-top
  vocab = write_vocab(tmp_path / "vocab.txt", TINY.vocab_size)
  with pytest.raises(ConversionError, match="gelu_approximate.*gelu"):
    writing.save_checkpoint(model, vocab, str(tmp_path / "out"), "keras_hub")
  assert not (tmp_path / "out").exists()


def test_keras_hub_output_without_keras_hub_is_one_line_naming_the_install(
    tmp_path, monkeypatch):
  import sys  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import writing  # pylint: disable=g-import-not-at-top
  from bert_tf.utils import errors  # pylint: disable=g-import-not-at-top
  vocab = write_vocab(tmp_path / "vocab.txt", TINY.vocab_size)
  model = BertEncoder.from_config_object(
      dataclasses.replace(TINY, hidden_activation="gelu_approximate"))
  monkeypatch.setitem(sys.modules, "keras_hub", None)  # makes `import keras_hub` fail
  with pytest.raises(ConversionError, match="pip install keras-hub") as raised:
    writing.save_checkpoint(model, vocab, str(tmp_path / "out"), "keras_hub")
  assert isinstance(raised.value, errors.UserError) and "\n" not in str(raised.value)
  assert sorted(p.name for p in tmp_path.iterdir()) == ["vocab.txt"]
