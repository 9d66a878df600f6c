"""Tests of bert_tf.checkpoints.google_tf1: name-based TF1 checkpoints."""

import json

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import google_tf1
from bert_tf.checkpoints.files import ConversionError


def test_written_checkpoint_has_flat_tf1_names_and_exact_values(tmp_path):
  rng = np.random.default_rng(0)
  weights = {"bert/embeddings/word_embeddings": rng.standard_normal((7, 4)).astype(np.float32),
             "cls/seq_relationship/output_weights": rng.standard_normal((2, 4)).astype(
                 np.float32)}
  prefix = google_tf1.write_google_tf1(weights, str(tmp_path / "bert_model.ckpt"))
  # Name-based: no object graph, just the variable names.
  assert dict(tf.train.list_variables(prefix)) == {
      "bert/embeddings/word_embeddings": [7, 4], "cls/seq_relationship/output_weights": [2, 4]}
  reader = tf.train.load_checkpoint(prefix)
  for name, array in weights.items():
    np.testing.assert_array_equal(reader.get_tensor(name), array)


def test_read_skips_step_and_optimizer_slots_and_finds_config_and_vocab(tmp_path):
  weights = {"bert/pooler/dense/bias": np.arange(3, dtype=np.float32),
             "bert/pooler/dense/bias/adam_m": np.zeros(3, np.float32),
             "bert/pooler/dense/bias/adam_v": np.zeros(3, np.float32),
             "global_step": np.array(10, np.int64)}
  google_tf1.write_google_tf1(weights, str(tmp_path / "bert_model.ckpt"))
  (tmp_path / "bert_config.json").write_text(json.dumps({"hidden_size": 3}))
  (tmp_path / "vocab.txt").write_text("[PAD]\n")
  raw = google_tf1.read_google_tf1(str(tmp_path))
  assert list(raw.weights) == ["bert/pooler/dense/bias"]
  np.testing.assert_array_equal(raw.weights["bert/pooler/dense/bias"], [0, 1, 2])
  assert raw.bert_config == {"hidden_size": 3}
  assert raw.vocab_file == str(tmp_path / "vocab.txt")
  assert raw.fmt == "google_tf1"


def test_prefix_is_found_from_index_file_and_ambiguous_folder_is_an_error(tmp_path):
  array = {"bert/x": np.zeros(2, np.float32)}
  google_tf1.write_google_tf1(array, str(tmp_path / "a.ckpt"))
  assert google_tf1.find_checkpoint_prefix(str(tmp_path / "a.ckpt.index")) == str(
      tmp_path / "a.ckpt")
  assert google_tf1.find_checkpoint_prefix(str(tmp_path)) == str(tmp_path / "a.ckpt")
  google_tf1.write_google_tf1(array, str(tmp_path / "b.ckpt"))
  with pytest.raises(ConversionError, match="several checkpoints"):
    google_tf1.find_checkpoint_prefix(str(tmp_path))
  with pytest.raises(ConversionError, match="No TensorFlow checkpoint"):
    google_tf1.find_checkpoint_prefix(str(tmp_path / "missing"))
