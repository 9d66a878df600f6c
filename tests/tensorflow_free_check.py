"""Run as a script with KERAS_BACKEND=jax: builds every bert_tf model, computes its
loss and trains one step with TensorFlow unimportable, then prints one JSON line
{model: {"loss": float, "changed": bool}} (tests/test_backend_neutral_core.py)."""

import json
import sys

sys.modules["tensorflow"] = None  # any import of TensorFlow now fails

import keras  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

from bert_tf import constants  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf import kernels  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf import losses  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.metrics import sums  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.models import lora  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.models import BertEncoder, BertPretrainer  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.models.bert_classifier import BertClassifier  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.models.bert_multiple_choice import BertMultipleChoice  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.models.bert_span_labeler import BertSpanLabeler  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.models.bert_token_classifier import BertTokenClassifier  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.training import jax_step  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.training.schedules import WarmupPolynomialDecay  # pylint: disable=g-import-not-at-top,wrong-import-position

B, T, P, V, C = 4, 12, 3, 64, 3
rng = np.random.default_rng(0)


def encoder():
  keras.utils.set_random_seed(0)
  return BertEncoder(vocab_size=V, hidden_size=16, num_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=T)


def encoder_inputs(shape=(B, T)):
  mask = np.ones(shape, np.int32)
  mask[..., -3:] = 0
  return {constants.INPUT_WORD_IDS: rng.integers(1, V, shape).astype(np.int32),
          constants.INPUT_MASK: mask,
          constants.INPUT_TYPE_IDS: (np.arange(T) >= T // 2).astype(np.int32)
                                    * np.ones(shape, np.int32)}


def pretraining_case():
  batch = encoder_inputs()
  batch[constants.MASKED_LM_POSITIONS] = rng.integers(1, T - 3, (B, P)).astype(np.int32)
  batch[constants.MASKED_LM_IDS] = rng.integers(1, V, (B, P)).astype(np.int32)
  batch[constants.MASKED_LM_WEIGHTS] = np.ones((B, P), np.float32)
  batch[constants.NEXT_SENTENCE_LABELS] = rng.integers(0, 2, (B, 1)).astype(np.int32)
  inputs = (*constants.ENCODER_INPUTS, constants.MASKED_LM_POSITIONS)
  return (BertPretrainer(encoder()), batch, inputs,
          lambda b, out: losses.pretraining_loss(b, out, global_batch_size=B))


def classifier_case(regression=False):
  batch = encoder_inputs()
  if regression:
    labels = rng.uniform(0, 5, (B,)).astype(np.float32)
  else:
    labels = rng.integers(0, C, (B,)).astype(np.int32)
  batch[constants.LABEL_IDS] = labels
  model = BertClassifier(encoder(), 1 if regression else C)
  return (model, batch, constants.ENCODER_INPUTS, lambda b, out: {"loss": losses.global_mean(
      losses.classification_loss(b[constants.LABEL_IDS], out["logits"], regression), B)})


def span_case():
  batch = encoder_inputs()
  batch["start_positions"] = rng.integers(0, T, (B,)).astype(np.int32)
  batch["end_positions"] = rng.integers(0, T, (B,)).astype(np.int32)

  def loss(b, out):
    start, end = losses.span_losses(b["start_positions"], b["end_positions"],
                                    out["start_logits"], out["end_logits"])
    return {"loss": losses.global_mean(start + end, B) / 2.0}
  return BertSpanLabeler(encoder()), batch, constants.ENCODER_INPUTS, loss


def tagger_case():
  batch = encoder_inputs()
  batch[constants.LABEL_IDS] = rng.integers(0, C, (B, T)).astype(np.int32)
  weights = batch[constants.INPUT_MASK].astype(np.float32)

  def loss(b, out):
    return {"loss": losses.global_mean(losses.token_classification_loss(
        b[constants.LABEL_IDS], out["logits"], weights), B)}
  return BertTokenClassifier(encoder(), C), batch, constants.ENCODER_INPUTS, loss


def multiple_choice_case():
  batch = encoder_inputs((B, 2, T))
  batch[constants.LABEL_IDS] = rng.integers(0, 2, (B,)).astype(np.int32)
  return (BertMultipleChoice(encoder(), 2), batch, constants.ENCODER_INPUTS,
          lambda b, out: {"loss": losses.global_mean(
              losses.classification_loss(b[constants.LABEL_IDS], out["logits"]), B)})


def lora_case():
  model, batch, inputs, loss = classifier_case()
  lora.enable(model, rank=2)
  return model, batch, inputs, loss


def train_one_step(model, batch, input_names, loss_fn):
  """One jit-compiled AdamW step; its loss is the loss at the initial weights."""
  optimizer = keras.optimizers.AdamW(
      WarmupPolynomialDecay(1e-3, warmup_steps=0, decay_steps=10), weight_decay=0.01,
      global_clipnorm=1.0)
  before = [np.asarray(v.value) for v in model.trainable_variables]
  state = jax_step.state_from(model, optimizer)
  step = jax_step.make_train_step(
      model, optimizer, lambda b, out, _: loss_fn(b, out),
      inputs_fn=lambda b: {name: b[name] for name in input_names})
  state, logs = step(state, batch)
  jax_step.write_back(state, model, optimizer)
  changed = any(not np.array_equal(a, np.asarray(v.value))
                for a, v in zip(before, model.trainable_variables))
  return {"loss": float(logs["loss"]), "changed": changed}


def main():
  assert keras.backend.backend() == "jax", keras.backend.backend()
  assert kernels.for_runtime(__import__("bert_tf.configs").configs.RuntimeConfig()) is None
  cases = {"encoder": None, "pretrainer": pretraining_case, "classifier": classifier_case,
           "regression": lambda: classifier_case(regression=True), "span_labeler": span_case,
           "token_classifier": tagger_case, "multiple_choice": multiple_choice_case,
           "lora_classifier": lora_case}
  results = {}
  for name, case in cases.items():
    if case is None:  # the bare encoder: its outputs, and the accuracy sums over them
      out = encoder()(encoder_inputs(), training=False)
      correct, count = sums.accuracy_sums(out["pooled_output"], np.zeros((B,), np.int32))
      assert float(count) == B and 0 <= float(correct) <= B
      results[name] = {"loss": float(np.mean(np.asarray(out["pooled_output"]))),
                       "changed": True}
      continue
    results[name] = train_one_step(*case())
  assert sys.modules["tensorflow"] is None
  print(json.dumps(results))


if __name__ == "__main__":
  main()
