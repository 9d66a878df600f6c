"""A classifier fine-tuned with transformers, converted by tools/convert_checkpoint.py and
exported by tools/export_saved_model.py from the converted folder (its params.yaml),
serves transformers' predictions: the softmax of its logits, and its label names."""

import os
import subprocess
import sys

import numpy as np
import pytest

import export_helpers as helpers

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tf = pytest.importorskip("tensorflow")

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LABELS = {0: "negative", 1: "neutral", 2: "positive"}


def _tool(name, *args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  process = subprocess.run([sys.executable, os.path.join(ROOT, "tools", name), *args],
                           capture_output=True, text=True, timeout=600, check=False, env=env)
  assert process.returncode == 0, process.stderr[-4000:]
  return process


def _hf_classifier(folder, vocab_size):
  config = transformers.BertConfig(
      vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
      intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
      attention_probs_dropout_prob=0.0, id2label=LABELS)
  torch.manual_seed(0)
  model = transformers.BertForSequenceClassification(config)
  with torch.no_grad():
    for parameter in model.parameters():
      parameter.add_(0.1 * torch.randn(parameter.shape))
  model.eval().save_pretrained(str(folder))
  return model


def test_converted_transformers_classifier_exports_and_serves_its_logits(tmp_path):
  hf = tmp_path / "hf"
  vocab = helpers.write_vocab(hf)
  with open(vocab, encoding="utf-8") as f:
    vocab_size = sum(1 for _ in f)
  hf_model = _hf_classifier(hf, vocab_size)

  _tool("convert_checkpoint.py", f"--input={hf}", f"--output_dir={tmp_path / 'ours'}")
  _tool("export_saved_model.py", f"--checkpoint={tmp_path / 'ours'}",
        f"--export_dir={tmp_path / 'exports'}", "--seq_length=16")

  rng = np.random.default_rng(3)
  ids = rng.integers(5, vocab_size, size=(4, 16)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 9:] = 0
  mask[3, 5:] = 0
  types = np.zeros_like(ids)
  types[:, 8:] = 1
  ids, types = ids * mask, types * mask
  with torch.no_grad():
    want = hf_model(input_ids=torch.tensor(ids, dtype=torch.long),
                    attention_mask=torch.tensor(mask, dtype=torch.long),
                    token_type_ids=torch.tensor(types, dtype=torch.long)).logits.numpy()

  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import  # its ops
  served = tf.saved_model.load(str(tmp_path / "exports" / "1"))
  out = served.signatures["serve_token_ids"](
      input_word_ids=tf.constant(ids), input_mask=tf.constant(mask),
      input_type_ids=tf.constant(types))
  log_probabilities = want - np.log(np.exp(want).sum(-1, keepdims=True))
  served_probabilities = out["probabilities"].numpy()
  np.testing.assert_allclose(served_probabilities, np.exp(log_probabilities), atol=1e-5)
  # The logits up to each row's constant, which the softmax drops.
  np.testing.assert_allclose(np.log(served_probabilities), log_probabilities, atol=1e-5)
  # The label names came with config.json's id2label.
  assert [name.decode() for name in out["label_names"].numpy()] == [
      LABELS[i] for i in want.argmax(-1)]

  # The converted folder evaluates too (its checkpoint holds no optimizer state), with
  # the settings of its params.yaml: the predictions are the served model's labels.
  texts = [" ".join(helpers.WORDS[i:i + 6]) for i in range(0, 30, 5)]
  dev = tmp_path / "dev.tsv"
  dev.write_text("text\tlabel\n" + "".join(f"{text}\t{LABELS[i % 3]}\n"
                                          for i, text in enumerate(texts)))
  _tool("train.py", "--mode=eval", f"--model_dir={tmp_path / 'ours'}", "--params_override="
        f"eval_data.input_path={dev},eval_data.format=tsv,eval_data.global_batch_size=2")
  predictions = tmp_path / "ours" / "predictions" / "step_1"
  (written,) = os.listdir(predictions)
  rows = (predictions / written).read_text().splitlines()[1:]
  evaluated = [row.split("\t")[1] for row in rows]
  served_labels = served.signatures["serving_default"](text=tf.constant(texts))["label_names"]
  assert evaluated == [name.decode() for name in served_labels.numpy()]

