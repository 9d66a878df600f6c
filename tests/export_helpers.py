"""Shared pieces of the export tests: a tiny vocab and model config, and the fresh-process run."""

import base64
import json
import os
import subprocess
import sys

import keras
import numpy as np
import tensorflow as tf

from bert_tf import constants
from bert_tf.tasks import base
from bert_tf.training import experiments

WORDS = ("the cat sat on mat a dog ran in park hello world is good bad what where who "
         "paris london city capital of france england john mary lives visited . , ? ! "
         "##s ##ed ##ing un ##believ ##able").split()
SEQ_LENGTH = 24
FRESH_CHECK = os.path.join(os.path.dirname(__file__), "export_fresh_process_check.py")

# Texts no server may fail on: empty, whitespace only, very long, invalid UTF-8,
# [MASK] marks, accents and punctuation; in one batch of mixed lengths.
BAD_TEXTS = [
    b"",
    b"   \t\n ",
    ("the cat sat on the mat . " * 4000).encode("utf-8")[:100_000],
    b"the \xff\xfe cat \xc3 sat",
    b"hello [MASK] world , the [MASK] .",
    "Héllo, Wörld! Who lives in Paris?".encode("utf-8"),
    b"dog",
]


def write_vocab(directory):
  """Writes a ~45-token uncased vocab holding every special token; returns its path."""
  os.makedirs(str(directory), exist_ok=True)
  path = os.path.join(str(directory), "vocab.txt")
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join((*constants.SPECIAL_TOKENS, *WORDS)) + "\n")
  return path


def experiment(vocab_file, task=None, seq_length=SEQ_LENGTH):
  """A tiny ExperimentConfig (hidden 32, 2 layers) for `task` (a task section dict)."""
  vocab_size = len(constants.SPECIAL_TOKENS) + len(WORDS)
  data = {"seq_length": seq_length, "max_predictions_per_seq": 3}
  return experiments.experiment_from_dict({
      "task": task or {"name": "pretraining"},
      "model": {"encoder": dict(vocab_size=vocab_size, hidden_size=32, num_layers=2,
                                num_attention_heads=2, intermediate_size=64,
                                max_position_embeddings=64, dropout_rate=0.0,
                                attention_dropout_rate=0.0),
                "head_dropout_rate": 0.0},
      "tokenizer": {"vocab_file": vocab_file},
      "train_data": data,
      "eval_data": dict(data, is_training=False),
  })


def build_model(config, seed=7):
  keras.utils.set_random_seed(seed)
  return base.get_task(config).build_model()


# A task section of each model family the exports serve, for the tiny experiment.
TASK_SECTIONS = {
    "pretraining": {"name": "pretraining"},
    "mnli": {"name": "sentence_prediction", "glue_task": "mnli"},
    "squad": {"name": "squad", "max_query_length": 8, "max_answer_length": 5},
    "tagging": {"name": "tagging", "label_names": ["O", "B-PER", "I-PER"]},
}


def random_model_inputs(model, seed=0, batch=3):
  """Random int32 token ids [batch, SEQ_LENGTH] (the last 5 positions padding) for the
  model's inputs, with masked_lm_positions [batch, 3] where it takes them."""
  rng = np.random.default_rng(seed)
  inputs = {
      constants.INPUT_WORD_IDS: rng.integers(5, 40, (batch, SEQ_LENGTH)).astype(np.int32),
      constants.INPUT_MASK: np.ones((batch, SEQ_LENGTH), np.int32),
      constants.INPUT_TYPE_IDS: np.zeros((batch, SEQ_LENGTH), np.int32),
  }
  inputs[constants.INPUT_MASK][:, SEQ_LENGTH - 5:] = 0
  names = [t.name.split(":")[0] for t in tf.nest.flatten(model.inputs)]
  if constants.MASKED_LM_POSITIONS in names:
    inputs[constants.MASKED_LM_POSITIONS] = np.tile(np.array([[1, 4, 7]], np.int32),
                                                    (batch, 1))
  return inputs


def save_checkpoint(model, directory):
  """Writes a checkpoint of the model's checkpoint_items, as the trainer does."""
  checkpoint = tf.train.Checkpoint(**model.checkpoint_items)
  return checkpoint.save(os.path.join(str(directory), "ckpt"))


def encode_array(value):
  value = np.asarray(value)
  if value.dtype == object or value.dtype.kind in "SU":
    flat = [v if isinstance(v, bytes) else str(v).encode("utf-8") for v in value.ravel()]
    return {"dtype": "string", "shape": list(value.shape),
            "b64": [base64.b64encode(v).decode("ascii") for v in flat]}
  return {"dtype": value.dtype.name, "shape": list(value.shape), "data": value.ravel().tolist()}


def call_entry(signature, inputs, expected):
  """A plan entry: call `signature` on inputs, expect `expected` (dicts of arrays)."""
  return {"signature": signature,
          "inputs": {k: encode_array(v) for k, v in inputs.items()},
          "expected": {k: encode_array(np.asarray(v)) for k, v in expected.items()}}


def run_fresh_process(plans, tmp_dir):
  """Runs tests/export_fresh_process_check.py once on several plans.

  Args:
    plans: list of (export_dir, calls, rest_bodies).
    tmp_dir: where plan and result files go.

  Returns:
    The list of result dicts, one per plan.
  """
  os.makedirs(str(tmp_dir), exist_ok=True)
  args = []
  for i, (export_dir, calls, rest_bodies) in enumerate(plans):
    plan_path = os.path.join(str(tmp_dir), f"plan_{i}.json")
    result_path = os.path.join(str(tmp_dir), f"result_{i}.json")
    with open(plan_path, "w", encoding="utf-8") as f:
      json.dump({"export_dir": export_dir, "calls": list(calls),
                 "rest": [{"body": b} for b in rest_bodies]}, f)
    args += [plan_path, result_path]
  process = subprocess.run([sys.executable, FRESH_CHECK, *args], capture_output=True,
                           text=True, timeout=600, check=False)
  assert process.returncode == 0, process.stderr[-4000:]
  results = []
  for result_path in args[1::2]:
    with open(result_path, encoding="utf-8") as f:
      results.append(json.load(f))
  return results


def signature_calls(module, texts):
  """Plan entries calling all three signatures on `texts` ({name: list of bytes})."""
  from bert_tf.export import rest_request  # pylint: disable=g-import-not-at-top
  text_inputs = {name: np.array(values, dtype=object) for name, values in texts.items()}
  tensors = {name: tf.constant(values) for name, values in texts.items()}
  ids = numpy_outputs(module.encode_text(tensors))
  examples = np.array([rest_request.make_example({n: texts[n][i] for n in texts})
                       for i in range(len(next(iter(texts.values()))))], dtype=object)
  return [
      call_entry("serving_default", text_inputs, numpy_outputs(module.predict_text(tensors))),
      call_entry("serve_token_ids", ids, numpy_outputs(module.predict_token_ids(ids))),
      call_entry("serve_examples", {"examples": examples},
                 numpy_outputs(module.predict_text(module.parse_examples(
                     tf.constant(examples))))),
  ]


def rest_bodies(module, texts):
  """REST bodies for every signature of `module`, in both formats."""
  from bert_tf.export import rest_request  # pylint: disable=g-import-not-at-top
  bodies = []
  for signature in ("serving_default", "serve_token_ids", "serve_examples"):
    columns = rest_request.signature_columns(signature, texts, module)
    for request_format in rest_request.FORMATS:
      bodies.append(rest_request.make_body(columns, request_format, signature))
  return bodies


def assert_fresh_result_ok(result):
  """Every call matched within 1e-5 and every REST body was accepted, without bert_tf."""
  assert "load_error" not in result, result["load_error"]
  assert result["modules"] == [], result["modules"]
  assert result["signatures"] == ["serve_examples", "serve_token_ids", "serving_default"]
  for call in result["calls"]:
    bad = {k: v for k, v in call["outputs"].items() if not v["ok"]}
    assert not bad, (call["signature"], bad)
  for entry in result["rest"]:
    assert entry["ok"], entry


def numpy_outputs(outputs):
  return {k: v.numpy() for k, v in outputs.items()}
