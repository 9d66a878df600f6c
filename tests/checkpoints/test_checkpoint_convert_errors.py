"""Tests of bert_tf.checkpoints.convert on bad input: an error naming the variable,
shapes or file, and nothing written (no output folder, no temporary folder left)."""

import json
import os

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from bert_tf.checkpoints import convert, reading, writing
from bert_tf.checkpoints.files import ConversionError

from checkpoint_helpers import TINY, tiny_model, write_vocab


@pytest.fixture(name="vocab")
def fixture_vocab(tmp_path):
  return write_vocab(tmp_path / "vocab.txt", TINY.vocab_size)


def _hf_folder(tmp_path, vocab):
  folder = tmp_path / "hf"
  writing.save_huggingface(tiny_model(), vocab, str(folder))
  return folder


def _edit_hf_folder(folder, config=None, drop=(), add=None):
  """Changes an HF folder's config.json fields and its tensors (dropped, added)."""
  if config:
    path = folder / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **config}))
  if drop or add:
    tensors = load_file(str(folder / "model.safetensors"))
    for name in drop:
      del tensors[name]
    tensors.update(add or {})
    save_file(tensors, str(folder / "model.safetensors"))


def _assert_conversion_fails_writing_nothing(folder, tmp_path, match):
  with pytest.raises(ConversionError, match=match):
    convert.convert_checkpoint(str(folder), str(tmp_path / "out"))
  assert not (tmp_path / "out").exists()
  assert not [p for p in os.listdir(tmp_path) if p.startswith(".out")]


def test_vocab_size_differing_from_embedding_table_is_an_error_and_writes_nothing(
    tmp_path, vocab):
  folder = _hf_folder(tmp_path, vocab)
  write_vocab(folder / "vocab.txt", TINY.vocab_size - 1)
  _assert_conversion_fails_writing_nothing(folder, tmp_path,
                                           r"vocab.txt has 98 tokens.*99 rows")


@pytest.mark.parametrize("edit, match", [
    (dict(config={"intermediate_size": 64}),
     r"encoder\.layer\.0\.intermediate\.dense\.weight has shape \[48, 32\].*needs \[64, 32\]"),
    (dict(drop=["bert.encoder.layer.1.output.LayerNorm.bias"]),
     r"Missing 1 required.*encoder\.layer\.1\.output\.LayerNorm\.bias"),
    (dict(add={"classifier.weight": np.zeros((3, TINY.hidden_size), np.float32)}),
     r"1 unexpected variables: classifier\.weight"),
    (dict(config={"num_hidden_layers": 1}),
     r"unexpected.*bert\.encoder\.layer\.1\..*Layer indices involved: \[1\]"),
], ids=["config_size_differing_from_tensor_names_both_shapes",
        "missing_required_variable_is_listed", "unexpected_variable_is_listed",
        "layer_count_differing_from_config_names_the_extra_layer"])
def test_folder_not_matching_its_config_is_an_error_naming_the_variable(tmp_path, vocab, edit,
                                                                        match):
  folder = _hf_folder(tmp_path, vocab)
  _edit_hf_folder(folder, **edit)
  _assert_conversion_fails_writing_nothing(folder, tmp_path, match)


def test_bert_tf_checkpoint_with_wrong_config_is_an_error(tmp_path, vocab):
  writing.save_bert_tf(tiny_model(), vocab, str(tmp_path / "ours"))
  config = tmp_path / "ours" / "config.yaml"
  config.write_text(config.read_text().replace("num_layers: 2", "num_layers: 3"))
  with pytest.raises(ConversionError, match="does not fit"):
    reading.read_checkpoint(str(tmp_path / "ours"))


def test_existing_output_folder_is_kept_unless_overwrite(tmp_path, vocab):
  folder = _hf_folder(tmp_path, vocab)
  (tmp_path / "out").mkdir()
  (tmp_path / "out" / "keep").write_text("x")
  with pytest.raises(ConversionError, match="already exists"):
    convert.convert_checkpoint(str(folder), str(tmp_path / "out"))
  assert (tmp_path / "out" / "keep").exists()
  convert.convert_checkpoint(str(folder), str(tmp_path / "out"), overwrite=True)
  assert sorted(os.listdir(tmp_path / "out")) == [
      "ckpt-1.h5", "config.yaml", "params.yaml", "vocab.txt"]


def test_a_folder_without_a_checkpoint_this_install_reads_says_what_it_holds(tmp_path,
                                                                             monkeypatch):
  from bert_tf.checkpoints import restore  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(restore, "_tensorflow_installed", lambda: False)
  converted_before = tmp_path / "bt_seq"  # an earlier version's converted folder
  converted_before.mkdir()
  for name in ("ckpt-1.index", "ckpt-1.data-00000-of-00001", "checkpoint", "vocab.txt"):
    (converted_before / name).write_text("x")
  with pytest.raises(FileNotFoundError) as raised:
    restore.resolve_checkpoint(str(converted_before))
  assert str(raised.value).startswith(
      f"No checkpoint in directory {converted_before}: found TensorFlow checkpoint files "
      "ckpt-1.index; reading them needs tensorflow")
  assert "writes a ckpt-N.h5" in str(raised.value)
  (tmp_path / "empty").mkdir()
  with pytest.raises(FileNotFoundError, match="empty: it is empty$"):
    restore.resolve_checkpoint(str(tmp_path / "empty"))
  (tmp_path / "other" / "a").mkdir(parents=True)
  (tmp_path / "other" / "notes.txt").write_text("x")
  with pytest.raises(FileNotFoundError, match=r"other: found a, notes.txt \(no ckpt-N.h5"):
    restore.resolve_checkpoint(str(tmp_path / "other"))


def test_conversion_without_tensorflow_runs_on_jax_and_refuses_google_tf1_naming_the_flag(
    monkeypatch):
  from bert_tf.checkpoints import files  # pylint: disable=g-import-not-at-top
  from bert_tf.utils import errors, optional  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(optional, "tensorflow_installed", lambda: False)
  monkeypatch.delenv("KERAS_BACKEND", raising=False)
  for flag in ("input_format", "output_format"):
    formats = {"input_format": "auto", "output_format": "bert_tf", flag: "google_tf1"}
    with pytest.raises(errors.InputError, match=f"^--{flag}=google_tf1 needs TensorFlow"):
      files.prepare_install(**formats)
  files.prepare_install("auto", "bert_tf")
  assert os.environ["KERAS_BACKEND"] == "jax"


def test_an_input_of_no_format_this_install_reads_says_what_it_holds(tmp_path, monkeypatch):
  import sys  # pylint: disable=g-import-not-at-top
  monkeypatch.setitem(sys.modules, "tensorflow", None)  # the JAX install
  for name in ("ckpt-1.index", "ckpt-1.data-00000-of-00001", "config.yaml"):
    (tmp_path / name).write_text("x")
  with pytest.raises(ConversionError) as raised:
    reading.detect_format(str(tmp_path))
  assert str(raised.value).startswith(f"Cannot tell the format of {tmp_path}: ")
  assert "no portable checkpoint (ckpt-N.h5); found TensorFlow checkpoint files " \
         "ckpt-1.index; reading them needs tensorflow" in str(raised.value)
