"""Hugging Face task models convert whole, heads included, and back.

Small random models made here with transformers (every bias and LayerNorm parameter
random too, so that a swapped or untransposed tensor changes the outputs) are saved with
save_pretrained, converted into the bert_tf task model of their task (checkpoint items,
params.yaml with the labels) and back into a folder that transformers loads; each
model's outputs equal transformers' within 1e-5.
"""

import json
import os

import numpy as np
import pytest
import yaml

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bert_tf import constants
from bert_tf.checkpoints import convert, reading, writing
from bert_tf.checkpoints.files import ConversionError
from bert_tf.models.bert_classifier import BertClassifier
from bert_tf.models.bert_multiple_choice import BertMultipleChoice
from bert_tf.models.bert_pretrainer import BertPretrainer
from bert_tf.models.bert_span_labeler import BertSpanLabeler
from bert_tf.models.bert_token_classifier import BertTokenClassifier
from bert_tf.training import trained_model

from checkpoint_helpers import TINY, tiny_task_model, token_batch, write_vocab

ATOL = 1e-5
CHOICES = 4


def hf_config(**fields):
  """transformers' BertConfig of checkpoint_helpers.TINY, without dropout."""
  return transformers.BertConfig(
      vocab_size=TINY.vocab_size, hidden_size=TINY.hidden_size,
      num_hidden_layers=TINY.num_layers, num_attention_heads=TINY.num_attention_heads,
      intermediate_size=TINY.intermediate_size,
      max_position_embeddings=TINY.max_position_embeddings,
      type_vocab_size=TINY.type_vocab_size, hidden_dropout_prob=0.0,
      attention_probs_dropout_prob=0.0, **fields)


def randomized(model, seed=0):
  """`model` in eval mode with every parameter drawn at random (LayerNorm scales near 1)."""
  generator = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for name, parameter in model.named_parameters():
      values = torch.randn(parameter.shape, generator=generator)
      if "LayerNorm.weight" in name:
        parameter.copy_(1.0 + 0.2 * values)
      else:
        parameter.copy_((0.1 if parameter.dim() == 1 else 0.2) * values)
  return model.eval()


def hf_outputs(model, features):
  """transformers' outputs under bert_tf's output names, as NumPy."""
  with torch.no_grad():
    out = model(input_ids=torch.tensor(features[constants.INPUT_WORD_IDS], dtype=torch.long),
                attention_mask=torch.tensor(features[constants.INPUT_MASK], dtype=torch.long),
                token_type_ids=torch.tensor(features[constants.INPUT_TYPE_IDS],
                                            dtype=torch.long))
  if hasattr(out, "start_logits"):
    return {"start_logits": out.start_logits.numpy(), "end_logits": out.end_logits.numpy()}
  if constants.MASKED_LM_POSITIONS in features:
    # The masked-LM logits of every position, at the positions bert_tf predicts.
    positions = features[constants.MASKED_LM_POSITIONS][..., None]
    if hasattr(out, "prediction_logits"):
      return {constants.MLM_LOGITS: np.take_along_axis(out.prediction_logits.numpy(),
                                                       positions, axis=1),
              constants.NSP_LOGITS: out.seq_relationship_logits.numpy()}
    return {constants.MLM_LOGITS: np.take_along_axis(out.logits.numpy(), positions, axis=1)}
  return {"logits": out.logits.numpy()}


def assert_outputs_match(ours, theirs):
  assert set(theirs) <= set(ours)
  for name, value in theirs.items():
    diff = float(np.abs(np.asarray(ours[name]) - value).max())
    assert diff < ATOL, f"{name}: max abs difference {diff}"


# name: (transformers class, config fields, bert_tf model class, task section expected).
CASES = {
    "classification": ("BertForSequenceClassification",
                       dict(id2label={0: "negative", 1: "neutral", 2: "positive"}),
                       BertClassifier,
                       {"name": "sentence_prediction", "num_classes": 3,
                        "label_names": ["negative", "neutral", "positive"]}),
    # transformers' default names (LABEL_0, LABEL_1) are bert_tf's default ones ("0", "1").
    "default_labels": ("BertForSequenceClassification", dict(num_labels=2), BertClassifier,
                       {"name": "sentence_prediction", "num_classes": 2}),
    "regression": ("BertForSequenceClassification", dict(num_labels=1), BertClassifier,
                   {"name": "sentence_prediction", "num_classes": 1}),
    "token_classification": ("BertForTokenClassification",
                             dict(id2label={0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC",
                                            4: "I-LOC"}),
                             BertTokenClassifier,
                             {"name": "tagging",
                              "label_names": ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]}),
    "question_answering": ("BertForQuestionAnswering", {}, BertSpanLabeler,
                           {"name": "squad"}),
    "multiple_choice": ("BertForMultipleChoice", {}, BertMultipleChoice,
                        {"name": "multiple_choice", "num_choices": CHOICES}),
    "pretraining": ("BertForPreTraining", {}, BertPretrainer,
                    {"name": "pretraining", "use_next_sentence_label": True}),
    "masked_lm": ("BertForMaskedLM", {}, BertPretrainer,
                  {"name": "pretraining", "use_next_sentence_label": False}),
}


def features_for(case):
  features = token_batch(choices=CHOICES if case == "multiple_choice" else None)
  if case in ("pretraining", "masked_lm"):
    features[constants.MASKED_LM_POSITIONS] = np.array([[1, 3, 6], [0, 2, 5], [1, 2, 3]],
                                                       np.int32)
  return features


def save_hf_model(case, folder, seed=0):
  class_name, fields, _, _ = CASES[case]
  model = randomized(getattr(transformers, class_name)(hf_config(**fields)), seed)
  model.save_pretrained(str(folder))
  write_vocab(folder / "vocab.txt", TINY.vocab_size)
  return model


# About 5 s a case on a loaded 2-core machine: the default suite runs the classifier.
@pytest.mark.parametrize("case", [case if case == "classification" else
                                  pytest.param(case, marks=pytest.mark.slow)
                                  for case in CASES])
def test_huggingface_task_model_converts_with_its_head_and_labels_and_back(tmp_path, case):
  class_name, _, model_class, task = CASES[case]
  hf_model = save_hf_model(case, tmp_path / "hf")
  features = features_for(case)
  want = hf_outputs(hf_model, features)

  summary = convert.convert_checkpoint(str(tmp_path / "hf"), str(tmp_path / "ours"))
  assert summary.input_format == "huggingface"
  params = yaml.safe_load((tmp_path / "ours" / "params.yaml").read_text())
  assert params["task"] == task
  assert params["tokenizer"]["vocab_file"] == "vocab.txt"  # beside it, wherever it goes
  assert params["model"]["encoder"] == TINY.as_dict()

  # What the exporter restores from the folder, by its params.yaml alone.
  experiment = trained_model.load_experiment(str(tmp_path / "ours" / "params.yaml"))
  assert_outputs_match(trained_model.model_from_checkpoint(experiment, str(tmp_path / "ours"))(
      features), want)

  loaded = reading.read_checkpoint(str(tmp_path / "ours"))
  assert isinstance(loaded.model, model_class)
  assert set(loaded.items) == set(loaded.model.checkpoint_items)
  assert_outputs_match(loaded.model(features), want)

  writing.save_huggingface(loaded.model, loaded.vocab_file, str(tmp_path / "back"),
                           settings=loaded.settings)
  config = json.loads((tmp_path / "back" / "config.json").read_text())
  assert config["architectures"] == [class_name]
  back = getattr(transformers, class_name).from_pretrained(str(tmp_path / "back"))
  assert back.config.id2label == hf_model.config.id2label
  assert back.config.num_labels == hf_model.config.num_labels
  assert_outputs_match(hf_outputs(back.eval(), features), want)


def test_a_token_classifier_without_tag_names_converts_with_one_warning_saying_so(
    tmp_path, caplog):
  """transformers' default id2label (LABEL_0, ...) names no tags: the tagger keeps those
  names (what its export serves), and the conversion says so and how to name them."""
  folder = tmp_path / "hf"
  transformers.BertForTokenClassification(hf_config(num_labels=3)).save_pretrained(str(folder))
  write_vocab(folder / "vocab.txt", TINY.vocab_size)
  with caplog.at_level("WARNING", logger="bert_tf.checkpoints"):
    convert.convert_checkpoint(str(folder), str(tmp_path / "ours"))
  (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
  assert warning.startswith(str(folder)) and (
      ": its config names no tags (transformers' default id2label, LABEL_0 ... LABEL_2)"
      in warning), warning
  assert "set id2label in its config.json" in warning
  params = yaml.safe_load((tmp_path / "ours" / "params.yaml").read_text())
  assert params["task"]["label_names"] == ["LABEL_0", "LABEL_1", "LABEL_2"]
  caplog.clear()
  save_hf_model("token_classification", tmp_path / "named")
  with caplog.at_level("WARNING", logger="bert_tf.checkpoints"):
    reading.read_checkpoint(str(tmp_path / "named"))
  assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_regression_head_and_cased_tokenizer_keep_in_both_directions(tmp_path):
  save_hf_model("regression", tmp_path / "hf")
  transformers.BertTokenizer(str(tmp_path / "hf" / "vocab.txt"),
                             do_lower_case=False).save_pretrained(str(tmp_path / "hf"))
  convert.convert_checkpoint(str(tmp_path / "hf"), str(tmp_path / "ours"))
  params = yaml.safe_load((tmp_path / "ours" / "params.yaml").read_text())
  assert params["tokenizer"]["lower_case"] is False
  loaded = reading.read_checkpoint(str(tmp_path / "ours"))
  assert loaded.model.num_classes == 1
  assert loaded.settings.label_names == ()
  convert.convert_checkpoint(str(tmp_path / "ours"), str(tmp_path / "back"),
                             output_format="huggingface")
  back = transformers.AutoConfig.from_pretrained(str(tmp_path / "back"))
  assert back.problem_type == "regression" and back.num_labels == 1
  tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "back"))
  # Cased: "TOK1" is not the vocab's "tok1".
  assert tokenizer.tokenize("TOK1 tok1") == ["[UNK]", "tok1"]


def test_converted_pooler_less_folder_round_trips_without_a_pooler(tmp_path):
  # transformers' token tagging model has no pooler; the converted one gets a fresh one
  # (unused by its logits), which is not written back.
  save_hf_model("token_classification", tmp_path / "hf")
  convert.convert_checkpoint(str(tmp_path / "hf"), str(tmp_path / "ours"))
  convert.convert_checkpoint(str(tmp_path / "ours"), str(tmp_path / "back"),
                             output_format="huggingface")
  from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top
  first = load_file(str(tmp_path / "hf" / "model.safetensors"))
  again = load_file(str(tmp_path / "back" / "model.safetensors"))
  assert sorted(first) == sorted(again)
  assert not any("pooler" in name for name in again)
  for name, value in first.items():
    np.testing.assert_array_equal(again[name], value, err_msg=name)


def test_fine_tuning_runs_model_dir_converts_to_transformers_with_glue_label_names(
    tmp_path):
  from bert_tf.checkpoints import portable  # pylint: disable=g-import-not-at-top
  from bert_tf.data.task_files import glue  # pylint: disable=g-import-not-at-top
  model = tiny_task_model("classifier", num_classes=3, seed=4)
  # A fine-tuning run's model_dir: a portable checkpoint and params.yaml, whose task
  # names a GLUE task and leaves the labels to it.
  model_dir = tmp_path / "run"
  portable.save(portable.path_for_step(str(model_dir), 7), model.checkpoint_items, step=7)
  (model_dir / "params.yaml").write_text(yaml.safe_dump({
      "task": {"name": "sentence_prediction", "glue_task": "mnli"},
      "model": {"encoder": TINY.as_dict()},
      "tokenizer": {"vocab_file": write_vocab(tmp_path / "vocab.txt", TINY.vocab_size)}}))
  convert.convert_checkpoint(str(model_dir), str(tmp_path / "hf"), output_format="huggingface")
  hf_model = transformers.AutoModelForSequenceClassification.from_pretrained(
      str(tmp_path / "hf")).eval()
  assert list(hf_model.config.id2label.values()) == list(glue.GLUE_TASKS["mnli"].label_names)
  features = token_batch()
  assert_outputs_match(model(features), hf_outputs(hf_model, features))


def test_classifier_head_without_an_architecture_is_an_error_asking_for_one(tmp_path):
  save_hf_model("classification", tmp_path / "hf")
  path = tmp_path / "hf" / "config.json"
  config = json.loads(path.read_text())
  del config["architectures"]
  path.write_text(json.dumps(config))
  with pytest.raises(ConversionError, match="set \"architectures\""):
    convert.convert_checkpoint(str(tmp_path / "hf"), str(tmp_path / "out"))
  assert not (tmp_path / "out").exists()


def test_multi_label_classifier_is_refused_naming_the_problem_type(tmp_path):
  save_hf_model("classification", tmp_path / "hf")
  path = tmp_path / "hf" / "config.json"
  path.write_text(json.dumps({**json.loads(path.read_text()),
                              "problem_type": "multi_label_classification"}))
  with pytest.raises(ConversionError, match="multi_label_classification"):
    convert.convert_checkpoint(str(tmp_path / "hf"), str(tmp_path / "out"))
  assert not os.path.exists(tmp_path / "out")
