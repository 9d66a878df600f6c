"""Exporting from a checkpoint for TF Serving: versions, assets, signatures, fresh process."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import export_helpers as helpers
from bert_tf import constants
from bert_tf.export import exporter
from bert_tf.export import fill_mask_serving as fm
from bert_tf.export import query
from bert_tf.export import serving_ops_check
from bert_tf.tasks import base
from bert_tf.training import trained_model


@pytest.fixture(scope="module")
def fill_mask_export(tmp_path_factory):
  """A pretraining checkpoint exported by export_from_checkpoint, then moved elsewhere."""
  tmp = tmp_path_factory.mktemp("export")
  vocab = helpers.write_vocab(tmp)
  config = helpers.experiment(vocab)
  params = os.path.join(str(tmp), "params.yaml")
  config.save(params)
  model = helpers.build_model(config)
  helpers.save_checkpoint(model, tmp / "model_dir")
  os.remove(vocab)  # The export must carry its own copy.
  vocab = helpers.write_vocab(tmp / "model_dir")
  path = exporter.export_from_checkpoint(str(tmp / "model_dir"), params,
                                         str(tmp / "exports"), vocab_file=vocab)
  moved = str(tmp / "moved" / "bert")
  shutil.move(str(tmp / "exports"), moved)
  os.remove(vocab)
  module = exporter.build_serving_module(trained_model.load_experiment(params), model,
                                         helpers.write_vocab(tmp / "again"))
  return {"path": path, "moved": os.path.join(moved, "1"), "module": module, "model": model,
          "tmp": tmp}


@pytest.fixture(scope="module")
def fresh_result(fill_mask_export):
  module = fill_mask_export["module"]
  texts = {"text": [b"the [MASK] sat on the mat .", b"hello [MASK] world , the [MASK] ."]}
  calls = helpers.signature_calls(module, texts)
  calls += helpers.signature_calls(module, {"text": helpers.BAD_TEXTS})[:1]
  bodies = helpers.rest_bodies(module, {"text": helpers.BAD_TEXTS})
  return helpers.run_fresh_process([(fill_mask_export["moved"], calls, bodies)],
                                   fill_mask_export["tmp"])[0]


def test_export_goes_to_integer_version_directory(fill_mask_export):
  assert os.path.basename(fill_mask_export["path"]) == "1"


def test_next_version_is_one_more_than_largest_integer_directory(tmp_path):
  for name in ("1", "3", "tmp", ".tmp-4-abc"):
    os.makedirs(tmp_path / name)
  assert exporter.next_version(str(tmp_path)) == 4
  assert exporter.next_version(str(tmp_path / "missing")) == 1


def test_moved_export_matches_in_process_model_for_every_signature(fresh_result):
  helpers.assert_fresh_result_ok(fresh_result)
  assert [c["signature"] for c in fresh_result["calls"]] == [
      "serving_default", "serve_token_ids", "serve_examples", "serving_default"]


def test_rest_bodies_in_both_formats_are_accepted_by_their_signatures(fresh_result):
  formats = {(r["signature"], r["format"]) for r in fresh_result["rest"] if r["ok"]}
  assert formats == {(s, f) for s in ("serving_default", "serve_token_ids", "serve_examples")
                     for f in ("instances", "inputs")}
  assert all(r["batch"][fm.MASK_COUNT] == len(helpers.BAD_TEXTS) for r in fresh_result["rest"])


def test_vocab_travels_as_an_asset(fill_mask_export):
  assert os.listdir(os.path.join(fill_mask_export["moved"], "assets")) == ["vocab.txt"]


def test_saved_model_cli_lists_the_three_signatures(fill_mask_export):
  cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
  out = subprocess.run([cli, "show", "--dir", fill_mask_export["moved"], "--all"],
                       capture_output=True, text=True, check=True).stdout
  for name in ("serving_default", "serve_token_ids", "serve_examples"):
    assert f"signature_def['{name}']" in out
  for name in ("text", "examples", *constants.ENCODER_INPUTS, fm.TOP_K_TOKENS):
    assert f"['{name}']" in out


def test_exported_ops_are_all_in_the_serving_allowlist(fill_mask_export):
  assert serving_ops_check.unexpected_ops(fill_mask_export["moved"]) == set()


def test_allowlist_check_names_an_op_outside_it(fill_mask_export):
  allowlist = serving_ops_check.export_op_allowlist() - {"WordpieceTokenizeWithOffsets"}
  assert serving_ops_check.unexpected_ops(fill_mask_export["moved"], allowlist) == {
      "WordpieceTokenizeWithOffsets"}


def test_fill_mask_finds_each_mask_position(fill_mask_export):
  module = fill_mask_export["module"]
  out = module.predict_text({"text": tf.constant(["hello [MASK] world , the [MASK] .", "dog"])})
  # [CLS] hello [MASK] world , the [MASK] . [SEP]
  np.testing.assert_array_equal(out[fm.MASK_COUNT], [2, 0])
  np.testing.assert_array_equal(out[fm.MASK_POSITIONS], [[2, 6, 0], [0, 0, 0]])
  assert np.all(out[fm.TOP_K_TOKENS].numpy()[1] == b"")


def test_token_ids_signature_gives_the_keras_model_probabilities(fill_mask_export):
  module, model = fill_mask_export["module"], fill_mask_export["model"]
  inputs = module.encode_text({"text": tf.constant(["the [MASK] sat"])})
  out = module.predict_token_ids(inputs)
  logits = model({**inputs, constants.MASKED_LM_POSITIONS: out[fm.MASK_POSITIONS]})
  probabilities = tf.nn.softmax(logits[constants.MLM_LOGITS][0, 0]).numpy()
  assert out[fm.MASK_COUNT][0] == 1
  best = np.sort(probabilities)[::-1][:module.top_k]
  np.testing.assert_allclose(out[fm.TOP_K_PROBABILITIES][0, 0], best, atol=1e-6)


def test_bad_texts_get_an_answer_per_row(fill_mask_export):
  out = fill_mask_export["module"].predict_text({"text": tf.constant(helpers.BAD_TEXTS)})
  np.testing.assert_array_equal(out[fm.MASK_COUNT], [0, 0, 0, 0, 2, 0, 0])
  assert out[fm.TOP_K_TOKENS].shape[0] == len(helpers.BAD_TEXTS)


def test_a_vocab_of_another_size_is_an_error_naming_it(tmp_path):
  vocab = helpers.write_vocab(tmp_path)
  config = helpers.experiment(vocab)
  small = tmp_path / "small.txt"
  small.write_text("\n".join(constants.SPECIAL_TOKENS) + "\nthe\n", encoding="utf-8")
  with pytest.raises(ValueError, match="small.txt has 6 tokens"):
    exporter.build_serving_module(config, None, str(small))


def test_a_task_without_a_serving_export_is_named_in_the_error(tmp_path, monkeypatch):
  config = helpers.experiment(helpers.write_vocab(tmp_path), {"name": "multiple_choice"})
  task = base.get_task(config)
  # Every registered task exports; this one is made to have no serving piece.
  monkeypatch.setattr(task, "export_kind", "")
  with pytest.raises(ValueError, match="No serving export for task 'multiple_choice'"):
    exporter.kind_of(task)
  assert exporter.kind_of(task, "encoder") == "encoder"


def test_a_kind_of_another_task_is_an_error(tmp_path):
  task = base.get_task(helpers.experiment(helpers.write_vocab(tmp_path), {"name": "tagging"}))
  assert exporter.kind_of(task) == "tagging"
  with pytest.raises(ValueError, match="exports as kind 'tagging'.*not 'classifier'"):
    exporter.kind_of(task, "classifier")
  with pytest.raises(ValueError, match="kind must be one of auto, classifier, encoder"):
    exporter.kind_of(task, "clasifier")


def test_a_batch_of_only_empty_texts_gets_no_masks(fill_mask_export):
  out = fill_mask_export["module"].predict_text({"text": tf.constant(["", "  "])})
  np.testing.assert_array_equal(out[fm.MASK_COUNT], [0, 0])


def test_fill_mask_says_how_many_masks_it_dropped(fill_mask_export):
  module = fill_mask_export["module"]
  many = " ".join(["[MASK]"] * (module.max_masks + 2))
  long_tail = "the cat " * 40 + "[MASK]"
  out = module.predict_text({"text": tf.constant([many, "the [MASK] sat", long_tail])})
  kept = min(module.max_masks, module.seq_length - 2)
  assert out[fm.MASK_COUNT].numpy().tolist() == [kept, 1, 0]
  assert out[fm.MASKS_DROPPED].numpy().tolist() == [module.max_masks + 2 - kept, 0, 1]


def test_query_asks_the_moved_export_base_at_its_newest_version(fill_mask_export):
  export = query.load(os.path.dirname(fill_mask_export["moved"]))
  assert (export.kind, export.inputs) == ("fill_mask", ("text",))
  answers = query.ask(export, ["hello [MASK] world , the [MASK] .", "dog"])
  served = fill_mask_export["module"].predict_text(
      {"text": tf.constant(["hello [MASK] world , the [MASK] ."])})
  assert [len(a["masks"]) for a in answers] == [2, 0]
  assert [t for t, _ in answers[0]["masks"][1]] == [
      t.decode() for t in served[fm.TOP_K_TOKENS].numpy()[0, 1]]
  lines = query.describe(answers[0])
  assert lines[0] == "text: hello [MASK] world , the [MASK] ." and len(lines) == 3


def test_a_missing_vocab_is_an_error_naming_the_setting_or_the_flag(tmp_path, monkeypatch):
  from bert_tf.utils import errors  # pylint: disable=g-import-not-at-top
  run = tmp_path / "run"  # params.yaml of an earlier version: the vocab relative to its cwd
  run.mkdir()
  helpers.experiment("vocab.txt").save(str(run / "params.yaml"))
  monkeypatch.chdir(tmp_path)
  experiment = trained_model.load_experiment(str(run / "params.yaml"))
  with pytest.raises(errors.MissingInputError) as raised:
    trained_model.vocab_of(experiment, None, str(run / "params.yaml"))
  assert str(raised.value) == (
      f"Vocab file not found: vocab.txt (tokenizer.vocab_file of {run / 'params.yaml'}); "
      "pass the vocab the model was trained with as --vocab_file")
  with pytest.raises(errors.MissingInputError, match=r"^Vocab file not found: v.txt "
                     r"\(--vocab_file\)"):
    trained_model.vocab_of(experiment, "v.txt")
