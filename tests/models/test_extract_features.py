"""Feature extraction: packing, layer selection, a run folder read for its encoder,
JSON lines output and the tool."""

import json
import os
import subprocess
import sys

import harness
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import constants
from bert_tf import feature_extraction as fe
from bert_tf.text.tokenizer import BertWordPieceTokenizer
import paths

VOCAB = [*constants.SPECIAL_TOKENS, "the", "cat", "sat", "on", "mat", "a", "dog", "ran",
         ".", "##s"]
ROOT = paths.ROOT


@pytest.fixture
def tokenizer(tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(VOCAB) + "\n")
  return BertWordPieceTokenizer(str(path), lower_case=True)


def test_parse_line_splits_pairs_on_triple_bar():
  assert fe.parse_line("The cat ||| a dog\n") == ("The cat", "a dog")
  assert fe.parse_line("no pair here") == ("no pair here", None)


def test_pack_lines_builds_cls_a_sep_b_sep_with_segment_ids(tokenizer):
  inputs, tokens = fe.pack_lines(["The cats sat. ||| a dog", "dog ran on the mat"],
                                 tokenizer, seq_length=8)
  # A has 5 pieces and B 2; A loses its last two to fit 8 - 3 = 5.
  assert tokens[0] == ["[CLS]", "the", "cat", "##s", "[SEP]", "a", "dog", "[SEP]"]
  assert inputs[constants.INPUT_TYPE_IDS][0].tolist() == [0, 0, 0, 0, 0, 1, 1, 1]
  # A single text keeps its first seq_length - 2 tokens.
  assert tokens[1] == ["[CLS]", "dog", "ran", "on", "the", "mat", "[SEP]"]
  assert inputs[constants.INPUT_MASK][1].tolist() == [1] * 7 + [0]


def test_pack_lines_cuts_b_on_a_tie_and_mixes_pairs_with_single_texts(tokenizer):
  inputs, tokens = fe.pack_lines(["the cat sat ||| a dog ran", "the", "a dog ||| mat"],
                                 tokenizer, seq_length=8)
  # Three pieces each, a budget of five: B loses its last piece, as in the original.
  assert tokens[0] == ["[CLS]", "the", "cat", "sat", "[SEP]", "a", "dog", "[SEP]"]
  assert tokens[1] == ["[CLS]", "the", "[SEP]"]
  assert inputs[constants.INPUT_TYPE_IDS][1].tolist() == [0] * 8
  assert tokens[2] == ["[CLS]", "a", "dog", "[SEP]", "mat", "[SEP]"]
  assert inputs[constants.INPUT_TYPE_IDS][2].tolist() == [0, 0, 0, 0, 1, 1, 0, 0]


def test_features_match_the_chosen_encoder_layers(tokenizer):
  encoder = harness.tiny_encoder(vocab_size=len(VOCAB))
  records = list(fe.extract_features(encoder, tokenizer, ["the cat sat", "a dog ||| ran"],
                                     layers=[-1, -2], seq_length=8, batch_size=1))
  assert [r["linex_index"] for r in records] == [0, 1]
  inputs, tokens = fe.pack_lines(["the cat sat"], tokenizer, 8)
  outputs = encoder({k: tf.constant(v) for k, v in inputs.items()})[constants.ENCODER_OUTPUTS]
  first = records[0]["features"]
  assert [f["token"] for f in first] == tokens[0] == ["[CLS]", "the", "cat", "sat", "[SEP]"]
  assert [entry["index"] for entry in first[2]["layers"]] == [-1, -2]
  np.testing.assert_allclose(first[2]["layers"][0]["values"], outputs[-1][0, 2], atol=1e-6)
  np.testing.assert_allclose(first[2]["layers"][1]["values"], outputs[-2][0, 2], atol=1e-6)
  concat = next(fe.extract_features(encoder, tokenizer, ["the cat sat"], layers=[-1, -2],
                                    seq_length=8, concat_layers=True))
  values = concat["features"][2]["layers"][0]["values"]
  assert len(values) == 2 * encoder.hidden_size
  np.testing.assert_allclose(values, np.concatenate([outputs[-1][0, 2], outputs[-2][0, 2]]),
                             atol=1e-6)


def test_layer_out_of_range_is_an_error(tokenizer):
  encoder = harness.tiny_encoder(vocab_size=len(VOCAB))
  with pytest.raises(ValueError, match="Layer -3 does not exist in a 2-layer encoder"):
    next(fe.extract_features(encoder, tokenizer, ["the cat"], layers=[-3]))


def test_a_run_folder_gives_its_encoder_vocab_and_case_as_the_converter_reads_them(tmp_path):
  """A training's model_dir (params.yaml naming its vocab.txt, relative) and a converted
  encoder's folder (config.yaml, vocab.txt beside it) need no bert_config.json."""
  import export_helpers  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import portable  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import writing  # pylint: disable=g-import-not-at-top
  run = tmp_path / "runs" / "base"
  vocab = export_helpers.write_vocab(run)
  config = export_helpers.experiment("vocab.txt").override({"tokenizer": {"lower_case": False}})
  model = export_helpers.build_model(config)
  portable.save(portable.path_for_step(str(run), 2), model.checkpoint_items, step=2)
  config.save(str(run / "params.yaml"))
  writing.save_checkpoint(model.encoder, vocab, str(tmp_path / "converted"))
  for folder, lower_case in ((run, False), (tmp_path / "converted", None)):
    encoder, vocab_file, case = fe.encoder_from_folder(str(folder))
    assert (os.path.abspath(vocab_file), case) == (str(folder / "vocab.txt"), lower_case)
    assert encoder.num_layers == 2
    for got, want in zip(encoder.weights, model.encoder.weights):
      np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=got.path)
  other_vocab = export_helpers.write_vocab(tmp_path / "other")
  assert fe.encoder_from_folder(str(run / "ckpt-2.h5"), other_vocab)[1] == other_vocab
  with pytest.raises(FileNotFoundError, match="pass --bert_config_file or --encoder_size"):
    fe.encoder_from_folder(str(tmp_path / "other"))


def test_a_seq_length_beyond_the_position_table_is_an_error_naming_the_flag(tokenizer):
  encoder = harness.tiny_encoder(vocab_size=len(VOCAB), max_position_embeddings=16)
  with pytest.raises(ValueError, match="--seq_length 32 exceeds the encoder's "
                                       "max_position_embeddings 16"):
    next(fe.extract_features(encoder, tokenizer, ["the cat"], seq_length=32))


@pytest.mark.slow  # the tool in a process
def test_tool_writes_one_json_line_per_input_line_and_a_summary(tmp_path):
  (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  (tmp_path / "in.txt").write_text("the cat sat\n\na dog ||| ran .\n")
  (tmp_path / "bert_config.json").write_text(json.dumps({
      "vocab_size": len(VOCAB), "hidden_size": 16, "num_hidden_layers": 2,
      "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 32}))
  out = tmp_path / "out.jsonl"
  result = subprocess.run(
      [sys.executable, os.path.join(ROOT, "tools", "extract_features.py"),
       f"--input_file={tmp_path / 'in.txt'}", f"--output_file={out}",
       f"--vocab_file={tmp_path / 'vocab.txt'}",
       f"--bert_config_file={tmp_path / 'bert_config.json'}", "--layers=-1",
       "--max_seq_length=16"], capture_output=True, text=True, timeout=300,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert result.returncode == 0, result.stderr
  assert "Wrote features of 2 lines" in result.stdout
  records = [json.loads(line) for line in out.read_text().splitlines()]
  assert [len(r["features"]) for r in records] == [5, 7]
  assert len(records[1]["features"][0]["layers"][0]["values"]) == 16
  assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []
