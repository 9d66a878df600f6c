"""Tests of bert_tf.checkpoints.convert: parity with a NumPy BERT, round trips (bad input:
test_checkpoint_convert_errors.py).

A tiny BERT with random weights (every bias and LayerNorm parameter random too, so that
any swapped or untransposed tensor changes the outputs) is written by our Hugging Face
and TF1 writers, and both the original Keras model and the model converted back are
compared against a NumPy implementation of BERT that reads the written file by the
Hugging Face names and torch layout, independently of Keras and of our name table.
"""

import json
import math
import os

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file, save_file

from bert_tf import constants
from bert_tf.checkpoints import (bert_config, convert, google_tf1, huggingface, reading,
                                 variables, writing)
from bert_tf.checkpoints.files import ConversionError
from bert_tf.models import BertEncoder, BertPretrainer

from checkpoint_helpers import TINY, tiny_model, write_vocab

PARITY_ATOL = 1e-4


def batch():
  rng = np.random.default_rng(7)
  ids = rng.integers(5, TINY.vocab_size, size=(3, 11)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 7:] = 0
  mask[2, 4:] = 0
  ids = ids * mask
  types = np.zeros_like(ids)
  types[0, 6:] = 1
  types[2, 2:4] = 1
  positions = np.array([[1, 3, 6], [0, 2, 5], [1, 2, 3]], np.int32)
  return {constants.INPUT_WORD_IDS: ids, constants.INPUT_MASK: mask,
          constants.INPUT_TYPE_IDS: types, constants.MASKED_LM_POSITIONS: positions}


def encoder_inputs(features):
  return {name: features[name] for name in constants.ENCODER_INPUTS}


# --------------------------------------------------------------------------------------
# A NumPy BERT over Hugging Face tensor names (torch layout: Linear weights are [out, in]).


def _layer_norm(x, weight, bias, eps):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * weight + bias


def _linear(x, w, name):
  return x @ w[name + ".weight"].T + w[name + ".bias"]


_erf = np.vectorize(math.erf)


def _gelu(x):
  return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def numpy_bert(tensors, config, ids, mask, types, positions=None):
  """BERT forward pass in float64 NumPy from a Hugging Face state dict.

  Returns:
    dict with sequence_output [B, T, H], pooled_output [B, H], and when the file holds
    the heads and `positions` is given, mlm_logits [B, P, V] and nsp_logits [B, 2].
  """
  prefix = "bert." if any(k.startswith("bert.") for k in tensors) else ""
  w = {k[len(prefix):] if k.startswith(prefix) else k: v.astype(np.float64)
       for k, v in tensors.items()}
  eps = config["layer_norm_eps"]
  heads = config["num_attention_heads"]
  seq = ids.shape[1]
  x = (w["embeddings.word_embeddings.weight"][ids]
       + w["embeddings.position_embeddings.weight"][:seq][None]
       + w["embeddings.token_type_embeddings.weight"][types])
  x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
  batch_size, hidden = x.shape[0], x.shape[2]
  size = hidden // heads
  keep = mask[:, None, None, :].astype(bool)
  for i in range(config["num_hidden_layers"]):
    p = f"encoder.layer.{i}."

    def split(t):
      return t.reshape(batch_size, seq, heads, size).transpose(0, 2, 1, 3)

    q = split(_linear(x, w, p + "attention.self.query"))
    k = split(_linear(x, w, p + "attention.self.key"))
    v = split(_linear(x, w, p + "attention.self.value"))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size)
    scores = np.where(keep, scores, -np.inf)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs = probs / probs.sum(-1, keepdims=True)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch_size, seq, hidden)
    attended = _linear(context, w, p + "attention.output.dense")
    x = _layer_norm(x + attended, w[p + "attention.output.LayerNorm.weight"],
                    w[p + "attention.output.LayerNorm.bias"], eps)
    ffn = _linear(_gelu(_linear(x, w, p + "intermediate.dense")), w, p + "output.dense")
    x = _layer_norm(x + ffn, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"],
                    eps)
  out = {"sequence_output": x,
         "pooled_output": np.tanh(_linear(x[:, 0], w, "pooler.dense"))}
  if positions is not None and "cls.predictions.bias" in w:
    gathered = np.take_along_axis(x, positions[:, :, None].astype(np.int64), axis=1)
    h = _gelu(_linear(gathered, w, "cls.predictions.transform.dense"))
    h = _layer_norm(h, w["cls.predictions.transform.LayerNorm.weight"],
                    w["cls.predictions.transform.LayerNorm.bias"], eps)
    out["mlm_logits"] = h @ w["embeddings.word_embeddings.weight"].T + w["cls.predictions.bias"]
    if "cls.seq_relationship.weight" in w:
      out["nsp_logits"] = _linear(out["pooled_output"], w, "cls.seq_relationship")
  return out


def _max_diffs(model, reference, features):
  """{output: max |model - reference|} over every output both have."""
  if isinstance(model, BertPretrainer):
    outputs = dict(model.encoder(encoder_inputs(features)))
    outputs.update(model(features))
  else:
    outputs = model(encoder_inputs(features))
  names = {"sequence_output": constants.SEQUENCE_OUTPUT,
           "pooled_output": constants.POOLED_OUTPUT,
           "mlm_logits": constants.MLM_LOGITS, "nsp_logits": constants.NSP_LOGITS}
  return {ref: float(np.abs(np.asarray(outputs[ours]) - reference[ref]).max())
          for ref, ours in names.items() if ref in reference}


def _assert_parity(model, tensors, config, features):
  f = features
  reference = numpy_bert(tensors, config, f[constants.INPUT_WORD_IDS], f[constants.INPUT_MASK],
                         f[constants.INPUT_TYPE_IDS], f[constants.MASKED_LM_POSITIONS])
  diffs = _max_diffs(model, reference, features)
  assert set(diffs) >= {"sequence_output", "pooled_output"}
  for name, diff in diffs.items():
    assert diff < PARITY_ATOL, f"{name}: max abs difference {diff}"
  return diffs


def _assert_same_weights(a, b):
  wa = variables.variables_by_path(a)
  wb = variables.variables_by_path(b)
  assert sorted(wa) == sorted(wb)
  for path in wa:
    np.testing.assert_array_equal(wa[path].numpy(), wb[path].numpy(), err_msg=path)


@pytest.fixture(name="vocab")
def fixture_vocab(tmp_path):
  return write_vocab(tmp_path / "vocab.txt", TINY.vocab_size)


# --------------------------------------------------------------------------------------
# Parity.


def test_huggingface_file_written_and_read_back_matches_numpy_bert(tmp_path, vocab):
  model = tiny_model()
  out = tmp_path / "hf"
  writing.save_huggingface(model, vocab, str(out))
  tensors = load_file(str(out / "model.safetensors"))
  config = json.loads((out / "config.json").read_text())
  features = batch()
  # The writer: the original model computes what the written file computes.
  _assert_parity(model, tensors, config, features)
  # The reader: the model converted from the file computes the same.
  loaded = reading.read_checkpoint(str(out))
  assert loaded.source_format == "huggingface"
  assert loaded.items == ("encoder", "masked_lm", "next_sentence")
  diffs = _assert_parity(loaded.model, tensors, config, features)
  assert set(diffs) == {"sequence_output", "pooled_output", "mlm_logits", "nsp_logits"}


def test_tf1_checkpoint_under_original_names_converts_with_parity(tmp_path, vocab):
  model = tiny_model(seed=3)
  hf = tmp_path / "hf"
  writing.save_huggingface(model, vocab, str(hf))
  tensors = load_file(str(hf / "model.safetensors"))
  config = json.loads((hf / "config.json").read_text())
  # A genuine name-based TF1 checkpoint, as the original release ships.
  folder = tmp_path / "tf1"
  folder.mkdir()
  google_tf1.write_google_tf1(variables.model_arrays(model, "google_tf1"),
                              str(folder / "bert_model.ckpt"))
  (folder / "bert_config.json").write_text(json.dumps(bert_config.to_bert_config(TINY)))
  os.rename(vocab, folder / "vocab.txt")
  names = dict(tf.train.list_variables(str(folder / "bert_model.ckpt")))
  assert names["cls/seq_relationship/output_weights"] == [2, TINY.hidden_size]
  assert "bert/encoder/layer_1/attention/self/query/kernel" in names

  out = tmp_path / "converted"
  summary = convert.convert_checkpoint(str(folder), str(out))
  assert summary.input_format == "google_tf1"
  loaded = reading.read_checkpoint(str(out))
  assert loaded.source_format == "bert_tf"
  _assert_parity(loaded.model, tensors, config, batch())
  _assert_same_weights(loaded.model, model)


def test_encoder_only_checkpoint_converts_to_encoder_with_parity(tmp_path, vocab):
  model = tiny_model(heads=False)
  out = tmp_path / "hf"
  writing.save_huggingface(model, vocab, str(out))
  tensors = load_file(str(out / "model.safetensors"))
  assert not any(name.startswith(("bert.", "cls.")) for name in tensors)
  assert json.loads((out / "config.json").read_text())["architectures"] == ["BertModel"]
  loaded = reading.read_checkpoint(str(out))
  assert isinstance(loaded.model, BertEncoder)
  assert loaded.items == ("encoder",)
  _assert_parity(loaded.model, tensors, json.loads((out / "config.json").read_text()),
                 batch())


# --------------------------------------------------------------------------------------
# Round trips.


@pytest.mark.parametrize("fmt", ["huggingface", "google_tf1"])
def test_round_trip_through_format_is_bitwise_identical(tmp_path, vocab, fmt):
  model = tiny_model(seed=5)
  writing.save_checkpoint(model, vocab, str(tmp_path / "ours"), "bert_tf")
  convert.convert_checkpoint(str(tmp_path / "ours"), str(tmp_path / "other"),
                             output_format=fmt)
  convert.convert_checkpoint(str(tmp_path / "other"), str(tmp_path / "back"))
  back = reading.read_checkpoint(str(tmp_path / "back"))
  _assert_same_weights(back.model, model)
  with open(vocab, "rb") as f, open(tmp_path / "back" / "vocab.txt", "rb") as g:
    assert f.read() == g.read()


def test_huggingface_file_round_trip_keeps_every_tensor_bitwise(tmp_path, vocab):
  model = tiny_model(seed=6)
  writing.save_huggingface(model, vocab, str(tmp_path / "a"))
  loaded = reading.read_checkpoint(str(tmp_path / "a"))
  writing.save_huggingface(loaded.model, loaded.vocab_file, str(tmp_path / "b"))
  a = load_file(str(tmp_path / "a" / "model.safetensors"))
  b = load_file(str(tmp_path / "b" / "model.safetensors"))
  assert sorted(a) == sorted(b)
  for name in a:
    np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_converted_folder_is_accepted_by_train_config_and_init_checkpoint(tmp_path, vocab):
  from bert_tf.checkpoints import restore
  from bert_tf.training import experiments
  model = tiny_model(seed=8)
  out = str(tmp_path / "ours")
  writing.save_bert_tf(model, vocab, out)
  # What `tools/train.py --experiment=... --config_file=<out>/config.yaml
  # --init_checkpoint=<out>` resolves: the converted encoder's sizes, and its checkpoint.
  experiment = experiments.resolve_experiment(
      "pretraining_bert_tiny", [os.path.join(out, "config.yaml")],
      shorthands={"task.init_checkpoint": out})
  assert experiment.model.encoder == TINY
  fresh = BertPretrainer(BertEncoder.from_config_object(experiment.model.encoder))
  restored = restore.restore_items(experiment.task.init_checkpoint, fresh.checkpoint_items,
                                   items=("encoder", "masked_lm", "next_sentence"))
  assert set(restored) == {"encoder", "masked_lm", "next_sentence"}
  features = batch()
  for name, value in model(features).items():
    np.testing.assert_array_equal(fresh(features)[name], value)


def test_conversion_writes_a_portable_checkpoint_and_folders_of_tensorflow_ones_still_read(
    tmp_path, vocab):
  from bert_tf.checkpoints import portable  # pylint: disable=g-import-not-at-top
  model = tiny_model(seed=9)
  written = writing.save_bert_tf(model, vocab, str(tmp_path / "new"))
  assert written == str(tmp_path / "new" / "ckpt-1.h5") and portable.is_portable(written)
  # What earlier versions wrote: a TensorFlow checkpoint beside config.yaml and vocab.txt.
  old = tmp_path / "old"
  tf.train.CheckpointManager(tf.train.Checkpoint(**model.checkpoint_items), str(old),
                             max_to_keep=1, checkpoint_name="ckpt").save()
  for name in ("config.yaml", "vocab.txt"):
    (old / name).write_bytes((tmp_path / "new" / name).read_bytes())
  for folder in ("new", "old"):
    loaded = reading.read_checkpoint(str(tmp_path / folder))
    assert loaded.source_format == "bert_tf"
    _assert_same_weights(loaded.model, model)


def test_a_trainers_model_dir_converts_with_the_vocab_its_params_yaml_names(tmp_path, vocab):
  import yaml  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import portable  # pylint: disable=g-import-not-at-top
  model = tiny_model(seed=10)
  model_dir = tmp_path / "runs" / "base"  # ckpt-N.h5 and params.yaml, no vocab.txt
  portable.save(portable.path_for_step(str(model_dir), 4), model.checkpoint_items, step=4)
  (model_dir / "params.yaml").write_text(yaml.safe_dump(
      {"model": {"encoder": TINY.as_dict()}, "tokenizer": {"vocab_file": vocab}}))
  out = tmp_path / "hf"
  summary = convert.convert_checkpoint(str(model_dir), str(out), output_format="huggingface")
  assert summary.input_format == "bert_tf"
  assert (out / "vocab.txt").read_bytes() == open(vocab, "rb").read()
  back = reading.read_checkpoint(str(out)).model
  features = batch()
  for name, value in model(features).items():
    np.testing.assert_allclose(back(features)[name], value, atol=1e-6)


def test_a_prefix_without_its_step_names_the_folder_and_the_numbered_checkpoint(
    tmp_path, vocab):
  from bert_tf.checkpoints import restore  # pylint: disable=g-import-not-at-top
  out = str(tmp_path / "bert_base")
  writing.save_bert_tf(tiny_model(seed=11), vocab, out)
  with pytest.raises(FileNotFoundError) as error:
    restore.resolve_checkpoint(os.path.join(out, "ckpt"))
  assert f"pass the folder {out}" in str(error.value)
  assert f"the file {os.path.join(out, 'ckpt-1.h5')}" in str(error.value)
  assert restore.resolve_checkpoint(out) == os.path.join(out, "ckpt-1.h5")


# --------------------------------------------------------------------------------------
# Hugging Face naming variants.


def test_huggingface_variants_gamma_beta_tied_decoder_and_position_ids_are_accepted(
    tmp_path, vocab):
  model = tiny_model(seed=9)
  writing.save_huggingface(model, vocab, str(tmp_path / "hf"))
  tensors = load_file(str(tmp_path / "hf" / "model.safetensors"))
  variant = {}
  for name, array in tensors.items():
    name = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
                                                                       "LayerNorm.beta")
    variant[name] = array
  variant["cls.predictions.decoder.weight"] = tensors["bert.embeddings.word_embeddings.weight"]
  variant["cls.predictions.decoder.bias"] = variant.pop("cls.predictions.bias")
  variant["bert.embeddings.position_ids"] = np.arange(TINY.max_position_embeddings)[None]
  save_file(variant, str(tmp_path / "hf" / "model.safetensors"))
  loaded = reading.read_checkpoint(str(tmp_path / "hf"))
  _assert_same_weights(loaded.model, model)


def test_untied_decoder_matrix_is_an_error_naming_both_tensors(tmp_path, vocab):
  model = tiny_model()
  writing.save_huggingface(model, vocab, str(tmp_path / "hf"))
  path = str(tmp_path / "hf" / "model.safetensors")
  tensors = load_file(path)
  tensors["cls.predictions.decoder.weight"] = np.zeros((TINY.vocab_size, TINY.hidden_size),
                                                       np.float32)
  save_file(tensors, path)
  with pytest.raises(ConversionError, match="decoder.weight.*word_embeddings"):
    reading.read_checkpoint(str(tmp_path / "hf"))


def test_detect_format_tells_the_three_formats_apart(tmp_path, vocab):
  model = tiny_model()
  for fmt in ("bert_tf", "huggingface", "google_tf1"):
    writing.save_checkpoint(model, vocab, str(tmp_path / fmt), fmt)
    assert reading.detect_format(str(tmp_path / fmt)) == fmt
  with pytest.raises(ConversionError, match="Cannot tell the format") as raised:
    reading.detect_format(str(tmp_path))
  # The remedy names the flag and its values.
  assert str(raised.value).endswith(
      "Pass its format: --input_format=bert_tf|google_tf1|huggingface|keras_hub")


def test_huggingface_writer_names_follow_bert_for_pretraining(tmp_path, vocab):
  writing.save_huggingface(tiny_model(), vocab, str(tmp_path / "hf"))
  folder = tmp_path / "hf"
  names = set(load_file(str(folder / huggingface.SAFETENSORS_FILE)))
  assert {"bert.embeddings.word_embeddings.weight", "bert.pooler.dense.weight",
          "cls.predictions.bias", "cls.seq_relationship.weight"} <= names
  # 5 embedding tensors, 16 per layer, 2 pooler, 5 masked-LM, 2 next-sentence.
  assert len(names) == 5 + 16 * TINY.num_layers + 2 + 5 + 2
  config = json.loads((folder / "config.json").read_text())
  assert config["architectures"] == ["BertForPreTraining"]
  assert bert_config.from_bert_config(config) == TINY


def test_trainer_model_dir_with_params_yaml_reads_with_all_heads(tmp_path, vocab):
  model = tiny_model(seed=11)
  writing.save_bert_tf(model, vocab, str(tmp_path / "run"))
  # A trainer's model_dir keeps its resolved config as params.yaml.
  os.rename(tmp_path / "run" / "config.yaml", tmp_path / "run" / "params.yaml")
  loaded = reading.read_checkpoint(str(tmp_path / "run"))
  assert loaded.source_format == "bert_tf"
  assert loaded.items == ("encoder", "masked_lm", "next_sentence")
  _assert_same_weights(loaded.model, model)


@pytest.mark.parametrize("fmt", ["bert_tf", "huggingface", "google_tf1"])
def test_converter_writes_each_format_to_remote_storage_whole_and_nothing_locally(
    tmp_path, vocab, fmt, monkeypatch):
  monkeypatch.chdir(tmp_path)
  model = tiny_model(seed=5)
  local = str(tmp_path / "local")
  writing.save_checkpoint(model, vocab, local, fmt)
  remote = f"ram://convert-{os.getpid()}-{fmt}/out"
  written = writing.save_checkpoint(model, vocab, remote, fmt)
  assert written.startswith(remote)
  names = sorted(name for _, _, found in tf.io.gfile.walk(remote) for name in found)
  assert names == sorted(os.listdir(local))
  assert tf.io.gfile.listdir(os.path.dirname(remote)) == ["out"]  # no temporary left
  assert not [name for name in os.listdir(tmp_path) if name.startswith("ram:")]
  for name in names:
    with tf.io.gfile.GFile(f"{remote}/{name}", "rb") as f, open(f"{local}/{name}", "rb") as g:
      # params.yaml (its vocab) names its own folder.
      if name != "params.yaml":
        assert f.read() == g.read(), name


# --------------------------------------------------------------------------------------
# Task heads in the original release's names.


@pytest.mark.parametrize("head, tf1_kernel", [("classifier", "output_weights"),
                                              ("span_labeler", "cls/squad/output_weights")])
def test_classifier_and_squad_heads_round_trip_through_original_release_names(
    tmp_path, vocab, head, tf1_kernel):
  from checkpoint_helpers import tiny_task_model  # pylint: disable=g-import-not-at-top
  model = tiny_task_model(head, seed=12)
  writing.save_checkpoint(model, vocab, str(tmp_path / "tf1"), "google_tf1")
  names = dict(tf.train.list_variables(str(tmp_path / "tf1" / "bert_model.ckpt")))
  # run_classifier.py and run_squad.py keep the head's weights as [classes, H].
  assert names[tf1_kernel] == [2 if head == "span_labeler" else 3, TINY.hidden_size]
  convert.convert_checkpoint(str(tmp_path / "tf1"), str(tmp_path / "back"))
  back = reading.read_checkpoint(str(tmp_path / "back"))
  assert type(back.model) is type(model)
  _assert_same_weights(back.model, model)


def test_a_head_the_original_release_never_named_is_refused_for_google_tf1(tmp_path, vocab):
  from checkpoint_helpers import tiny_task_model  # pylint: disable=g-import-not-at-top
  with pytest.raises(ConversionError, match="google_tf1 format has no names for.*tagger"):
    writing.save_checkpoint(tiny_task_model("tagger"), vocab, str(tmp_path / "out"),
                            "google_tf1")
  assert not (tmp_path / "out").exists()


def test_conversion_falls_back_past_a_newest_checkpoint_failing_its_checksum_or_refuses_it(
    tmp_path, vocab, caplog):
  import logging  # pylint: disable=g-import-not-at-top
  import yaml  # pylint: disable=g-import-not-at-top
  import checkpoint_helpers  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import portable  # pylint: disable=g-import-not-at-top
  from bert_tf.utils import errors  # pylint: disable=g-import-not-at-top
  older, newer = tiny_model(seed=12), tiny_model(seed=13)
  model_dir = tmp_path / "run"
  for step, model in ((2, older), (4, newer)):
    portable.save(portable.path_for_step(str(model_dir), step), model.checkpoint_items,
                  step=step)
  (model_dir / "params.yaml").write_text(yaml.safe_dump(
      {"model": {"encoder": TINY.as_dict()}, "tokenizer": {"vocab_file": vocab}}))
  damaged = str(model_dir / "ckpt-4.h5")
  name = "items/encoder/embeddings/word_embeddings"
  checkpoint_helpers.flip_bit(damaged, name, bit=6)
  with caplog.at_level(logging.WARNING):
    convert.convert_checkpoint(str(model_dir), str(tmp_path / "hf"),
                               output_format="huggingface")
  assert [r.getMessage() for r in caplog.records if "checksum" in r.getMessage()][0].endswith(
      f"using the newest readable checkpoint {model_dir / 'ckpt-2.h5'} instead")
  back = reading.read_checkpoint(str(tmp_path / "hf")).model
  features = batch()
  for key, value in older(features).items():
    np.testing.assert_allclose(back(features)[key], value, atol=1e-6)
  # Named itself, the damaged checkpoint is refused in one line naming it and the array.
  with pytest.raises(ConversionError) as raised:
    convert.convert_checkpoint(damaged, str(tmp_path / "hf2"), output_format="huggingface")
  message = errors.user_message(raised.value)
  assert message.startswith(f"Checkpoint {damaged} fails its checksum at {name} ")
  assert "\n" not in message and not (tmp_path / "hf2").exists()


def test_a_converted_task_folder_moved_and_read_from_elsewhere_has_the_vocab_it_holds_and_its_params_yaml_checked(
    tmp_path, vocab, monkeypatch):
  from checkpoint_helpers import tiny_task_model  # pylint: disable=g-import-not-at-top
  from bert_tf.configs import params_checksum  # pylint: disable=g-import-not-at-top
  from bert_tf.training import trained_model  # pylint: disable=g-import-not-at-top
  writing.save_bert_tf(tiny_task_model("classifier"), vocab, str(tmp_path / "bt_seq"))
  params = (tmp_path / "bt_seq" / "params.yaml").read_text()
  assert "vocab_file: vocab.txt\n" in params
  # Its CRC32C first, as a training run's: a damaged copy is named damaged.
  assert params.startswith("# bert_tf params.yaml; CRC32C of the lines below: ")
  (tmp_path / "damaged.yaml").write_text(params.replace("vocab.txt", "vocab.tx"))
  os.makedirs(tmp_path / "damaged")
  os.rename(tmp_path / "damaged.yaml", tmp_path / "damaged" / "params.yaml")
  with pytest.raises(params_checksum.DamagedParamsError, match="fails its CRC32C"):
    trained_model.load_experiment(str(tmp_path / "damaged" / "params.yaml"))
  moved = tmp_path / "elsewhere" / "bt_seq"
  os.renames(tmp_path / "bt_seq", moved)
  monkeypatch.chdir(tmp_path)
  experiment = trained_model.load_experiment(str(moved / "params.yaml"))
  assert trained_model.vocab_of(experiment) == str(moved / "vocab.txt")
  assert reading.read_checkpoint(str(moved)).vocab_file == str(moved / "vocab.txt")
