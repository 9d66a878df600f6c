"""Tests of bert_tf.checkpoints.huggingface: safetensors and pytorch_model.bin reading."""

import json
import sys

import numpy as np
import pytest
from safetensors.numpy import save_file, safe_open

from bert_tf.checkpoints import huggingface
from bert_tf.checkpoints.files import ConversionError

CONFIG = {"model_type": "bert", "hidden_size": 4}


def _folder(tmp_path, config=None):
  (tmp_path / "config.json").write_text(json.dumps(config or CONFIG))
  return tmp_path


def test_float16_tensors_are_read_as_float32_and_int_buffers_kept(tmp_path):
  folder = _folder(tmp_path)
  save_file({"pooler.dense.bias": np.array([0.5, 1.5], np.float16),
             "embeddings.position_ids": np.arange(3)[None]},
            str(folder / "model.safetensors"))
  raw = huggingface.read_huggingface(str(folder))
  assert raw.weights["pooler.dense.bias"].dtype == np.float32
  np.testing.assert_array_equal(raw.weights["pooler.dense.bias"], [0.5, 1.5])
  assert raw.weights["embeddings.position_ids"].dtype == np.int64
  assert raw.bert_config == CONFIG and raw.vocab_file is None


def test_sharded_safetensors_are_read_through_the_index(tmp_path):
  folder = _folder(tmp_path)
  save_file({"a.weight": np.ones((2, 2), np.float32)}, str(folder / "s1.safetensors"))
  save_file({"b.bias": np.zeros(2, np.float32)}, str(folder / "s2.safetensors"))
  (folder / "model.safetensors.index.json").write_text(json.dumps(
      {"weight_map": {"a.weight": "s1.safetensors", "b.bias": "s2.safetensors"}}))
  raw = huggingface.read_huggingface(str(folder))
  assert sorted(raw.weights) == ["a.weight", "b.bias"]


def test_pytorch_bin_without_torch_is_an_error_naming_the_remedy(tmp_path, monkeypatch):
  folder = _folder(tmp_path)
  (folder / "pytorch_model.bin").write_bytes(b"not read")
  monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
  with pytest.raises(ConversionError, match="needs torch.*model.safetensors"):
    huggingface.read_huggingface(str(folder))


@pytest.mark.parametrize("config,message", [
    ({"model_type": "roberta"}, "model_type is 'roberta'"),
    ({"model_type": "bert", "position_embedding_type": "relative_key"}, "relative_key"),
])
def test_non_bert_architectures_are_errors(tmp_path, config, message):
  folder = _folder(tmp_path, config)
  save_file({"x": np.zeros(1, np.float32)}, str(folder / "model.safetensors"))
  with pytest.raises(ConversionError, match=message):
    huggingface.read_huggingface(str(folder))


def test_written_file_declares_pytorch_format_for_transformers(tmp_path):
  huggingface.write_huggingface({"pooler.dense.bias": np.ones(2, np.float32)},
                                {"model_type": "bert"}, str(tmp_path))
  with safe_open(str(tmp_path / "model.safetensors"), "np") as f:
    assert f.metadata() == {"format": "pt"}
  assert json.loads((tmp_path / "config.json").read_text()) == {"model_type": "bert"}
  assert huggingface.is_huggingface_folder(str(tmp_path))


def test_missing_weights_and_missing_config_are_errors(tmp_path):
  with pytest.raises(ConversionError, match="No weights"):
    huggingface.read_huggingface(str(tmp_path))
  save_file({"x": np.zeros(1, np.float32)}, str(tmp_path / "model.safetensors"))
  with pytest.raises(ConversionError, match="No config.json"):
    huggingface.read_huggingface(str(tmp_path))
