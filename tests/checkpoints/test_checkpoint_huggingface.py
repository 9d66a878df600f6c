"""Tests of bert_tf.checkpoints.huggingface: safetensors and pytorch_model.bin reading, from
local and remote folders."""

import json
import os
import sys
import tempfile

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import save_file, safe_open

from bert_tf.checkpoints import convert, huggingface, reading, writing
from bert_tf.checkpoints.files import ConversionError
from bert_tf.utils import file_systems

from checkpoint_helpers import TINY, tiny_model, write_vocab

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


def _upload(local_folder, remote_folder):
  """Copies the files of a local folder to a folder of TensorFlow's ram:// file system."""
  tf.io.gfile.makedirs(remote_folder)
  for name in os.listdir(local_folder):
    tf.io.gfile.copy(os.path.join(local_folder, name), f"{remote_folder}/{name}")


def test_remote_folder_converts_to_the_same_weights_and_leaves_no_local_copy(
    tmp_path, monkeypatch):
  vocab = write_vocab(tmp_path / "vocab.txt", TINY.vocab_size)
  model = tiny_model(seed=3)
  writing.save_huggingface(model, vocab, str(tmp_path / "hf"))
  remote = f"ram://hf-input-{os.getpid()}/model"
  _upload(tmp_path / "hf", remote)
  staging = tmp_path / "staging"
  staging.mkdir()
  monkeypatch.setattr(tempfile, "tempdir", str(staging))
  assert reading.detect_format(remote) == "huggingface"
  summary = convert.convert_checkpoint(remote, str(tmp_path / "out"))
  assert summary.input_format == "huggingface"
  loaded = reading.read_checkpoint(str(tmp_path / "out"))
  assert loaded.items == ("encoder", "masked_lm", "next_sentence")
  for got, want in zip(loaded.model.weights, model.weights):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=got.path)
  assert (tmp_path / "out" / "vocab.txt").read_bytes() == open(vocab, "rb").read()
  assert not os.listdir(staging)  # the local copies of remote weights are deleted


def test_remote_sharded_safetensors_are_read_through_the_index(tmp_path):
  test_sharded_safetensors_are_read_through_the_index(tmp_path)
  remote = f"ram://hf-sharded-{os.getpid()}/model"
  _upload(tmp_path, remote)
  raw = huggingface.read_huggingface(remote)
  assert sorted(raw.weights) == ["a.weight", "b.bias"]
  assert raw.source == f"{remote}/model.safetensors.index.json"


def test_input_on_storage_no_library_serves_is_one_line_naming_it_and_writes_nothing(
    tmp_path):
  with pytest.raises(file_systems.StorageError) as raised:
    convert.convert_checkpoint("nosuch://bucket/hf", str(tmp_path / "out"))
  message = str(raised.value)
  assert "\n" not in message
  assert message.startswith("input: cannot read nosuch://bucket/hf: ")
  assert not os.listdir(tmp_path)



def test_a_remote_trainers_model_dir_converts_with_the_vocab_its_params_yaml_names(tmp_path):
  import yaml  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import portable  # pylint: disable=g-import-not-at-top
  vocab = write_vocab(tmp_path / "vocab.txt", TINY.vocab_size)
  model = tiny_model(seed=10)
  model_dir = f"ram://model-dir-input-{os.getpid()}/run"  # ckpt-N.h5 and params.yaml
  portable.save(portable.path_for_step(model_dir, 4), model.checkpoint_items, step=4)
  with tf.io.gfile.GFile(f"{model_dir}/params.yaml", "w") as f:
    f.write(yaml.safe_dump({"model": {"encoder": TINY.as_dict()},
                            "tokenizer": {"vocab_file": vocab}}))
  summary = convert.convert_checkpoint(model_dir, str(tmp_path / "out"))
  assert summary.input_format == "bert_tf"
  loaded = reading.read_checkpoint(str(tmp_path / "out"))
  for got, want in zip(loaded.model.weights, model.weights):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=got.path)
