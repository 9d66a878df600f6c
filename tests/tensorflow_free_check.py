"""Run as a script with KERAS_BACKEND=jax: builds every bert_tf model, computes its
loss and trains one jit-compiled step with TensorFlow unimportable, then prints one
JSON line {model: {"loss": float, "changed": bool}} (tests/backends/test_backend_neutral_core.py).

The losses and labels are the cross-backend harness's (tests/backend_worker.py: each
family's loss from bert_tf.losses); the step is bert_tf.training.jax_engine.step's, with
the JAX engine's AdamW (bert_tf.training.jax_engine.optimizer) and the project's schedule.
"""

import json
import os
import sys

sys.modules["tensorflow"] = None  # any import of TensorFlow now fails
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

import backend_worker  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf import configs  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf import constants  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf import kernels  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.models import BertEncoder, BertPretrainer  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.models import lora  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.models.bert_classifier import BertClassifier  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.models.bert_multiple_choice import BertMultipleChoice  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.models.bert_span_labeler import BertSpanLabeler  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.models.bert_token_classifier import BertTokenClassifier  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.training.jax_engine import step as jax_step  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.training.jax_engine import optimizer as stateless_optimizer  # pylint: disable=g-import-not-at-top,wrong-import-position

B, T, P, V, C = 4, 12, 3, 64, 3


def encoder():
  keras.utils.set_random_seed(0)
  return BertEncoder(vocab_size=V, hidden_size=16, num_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=T)


def with_lora(model):
  lora.enable(model, rank=2)
  return model


# name -> (model family in backend_worker.LOSSES, model builder, choices per example,
# classes of its logits).
CASES = {
    "encoder": ("encoder", encoder, None, 0),
    "pretrainer": ("pretraining", lambda: BertPretrainer(encoder()), None, V),
    "classifier": ("classification", lambda: BertClassifier(encoder(), C), None, C),
    "regression": ("regression", lambda: BertClassifier(encoder(), 1), None, 1),
    "span_labeler": ("span", lambda: BertSpanLabeler(encoder()), None, 0),
    "token_classifier": ("tagging", lambda: BertTokenClassifier(encoder(), C), None, C),
    "multiple_choice": ("multiple_choice", lambda: BertMultipleChoice(encoder(), 2), 2, 2),
    "lora_classifier": ("classification",
                        lambda: with_lora(BertClassifier(encoder(), C)), None, C),
}


def model_inputs(model, choices, rng):
  """A batch of every input the model takes: [B, T] (or [B, choices, T]) int32."""
  shape = (B, T) if choices is None else (B, choices, T)
  mask = np.ones(shape, np.int32)
  mask[..., -3:] = 0
  inputs = {constants.INPUT_WORD_IDS: rng.integers(1, V, shape).astype(np.int32),
            constants.INPUT_MASK: mask,
            constants.INPUT_TYPE_IDS: np.broadcast_to(
                (np.arange(T) >= T // 2).astype(np.int32), shape).copy()}
  if constants.MASKED_LM_POSITIONS in [x.name for x in model.inputs]:
    inputs[constants.MASKED_LM_POSITIONS] = rng.integers(1, T - 3, (B, P)).astype(np.int32)
  return inputs


def train_one_step(name):
  """One jit-compiled AdamW step; its loss is the loss at the initial weights."""
  family, build, choices, classes = CASES[name]
  model = build()
  inputs = model_inputs(model, choices, np.random.default_rng(0))
  # make_labels reads the number of classes off the outputs' last axis.
  shapes = {"logits": np.empty((1, classes)), constants.MLM_LOGITS: np.empty((1, classes))}
  batch = {**inputs, **backend_worker.make_labels(family, inputs, shapes)}
  optimizer = stateless_optimizer.build_stateless_optimizer(
      configs.OptimizerConfig(learning_rate=1e-3, warmup_steps=0), 10,
      model.trainable_variables)
  before = [np.asarray(v.value) for v in model.trainable_variables]
  step = jax_step.make_train_step(
      model, optimizer,
      lambda b, out, _: {"loss": backend_worker.LOSSES[family](b, out)},
      inputs_fn=lambda b: {k: b[k] for k in inputs})
  state, logs = step(jax_step.state_from(model, optimizer), batch)
  jax_step.write_back(state, model, optimizer)
  changed = any(not np.array_equal(a, np.asarray(v.value))
                for a, v in zip(before, model.trainable_variables))
  return {"loss": float(logs["loss"]), "changed": changed}


def main():
  assert keras.backend.backend() == "jax", keras.backend.backend()
  assert kernels.for_runtime(configs.RuntimeConfig()) is None
  results = {name: train_one_step(name) for name in CASES}
  assert sys.modules["tensorflow"] is None
  print(json.dumps(results))


if __name__ == "__main__":
  main()
