"""Runs the harness's models on one Keras backend, for the cross-backend checks.

The harness (tests/harness.py) writes each model's serialized config, its weights (a
Keras `.weights.h5`) and one batch (inputs and labels, `.npz`) into a folder, then runs
this module there on every backend: `KERAS_BACKEND=jax python tests/backend_worker.py
FOLDER` (and torch) as subprocesses, since Keras fixes its backend per process, and
`run(FOLDER)` inside the TensorFlow test process. Each backend, for every model, loads
the weights, computes the outputs and the loss, takes one AdamW step with Keras's own
trainer (`train_on_batch`), and writes the outputs, the losses and the trained weights
back (`.weights.h5` again, so the file travels both ways); on torch it also fits every
model with `model.fit`. The harness compares.

Imports no TensorFlow, so that what it runs on JAX and torch is the model alone.
"""

import json
import os
import sys
import time
import traceback
import warnings

import keras
import numpy as np
from keras import ops

from bert_tf import constants
from bert_tf import losses
# Imported for their registrations with keras.saving, which rebuilds the models by name.
from bert_tf.models import bert_classifier  # pylint: disable=unused-import
from bert_tf.models import bert_encoder  # pylint: disable=unused-import
from bert_tf.models import bert_multiple_choice  # pylint: disable=unused-import
from bert_tf.models import bert_pretrainer  # pylint: disable=unused-import
from bert_tf.models import bert_span_labeler  # pylint: disable=unused-import
from bert_tf.models import bert_token_classifier  # pylint: disable=unused-import

# One AdamW step's settings, the same on every backend. Adam's first step moves a weight
# by lr * g / (|g| + epsilon): about lr wherever |g| >> epsilon, whatever |g|. Where a
# gradient is zero but for rounding (a bias under a softmax over positions, an input to
# LayerNorm along the mean), the backends' roundings differ by up to ~1e-6, and with
# Keras's epsilon of 1e-7 that noise alone moves the weight by up to lr, differently on
# each backend. With epsilon 1e-4 such a move is at most lr * 1e-6 / 1e-4 = 1e-2 lr,
# while every gradient above 1e-3 still takes a step of about lr.
LEARNING_RATE = 1e-3
WEIGHT_DECAY = 0.01
ADAM_EPSILON = 1e-4
FIT_EPOCHS = 2

# The span labels as bert_tf.data.task_files.squad names them (that module imports TensorFlow).
START_POSITIONS = "start_positions"
END_POSITIONS = "end_positions"
# The tagging loss's weights: 1 at the labelled tokens.
LABEL_WEIGHTS = "label_weights"


def mean_square_loss(outputs, inputs):  # pylint: disable=unused-argument
  """A loss every float output contributes to: the mean square distance to 1, summed.

  (Not to 0: freshly initialized heads are already close to 0.) float32 scalar.
  """
  return sum(ops.mean(ops.square(ops.cast(x, "float32") - 1.0))
             for x in keras.tree.flatten(outputs))


def _classification(features, outputs):
  return ops.mean(losses.classification_loss(features[constants.LABEL_IDS],
                                             outputs["logits"]))


def _regression(features, outputs):
  return ops.mean(losses.classification_loss(features[constants.LABEL_IDS],
                                             outputs["logits"], regression=True))


def _span(features, outputs):
  start, end = losses.span_losses(features[START_POSITIONS], features[END_POSITIONS],
                                  outputs["start_logits"], outputs["end_logits"])
  return ops.mean(start + end) / 2.0


def _tagging(features, outputs):
  return ops.mean(losses.token_classification_loss(
      features[constants.LABEL_IDS], outputs["logits"], features[LABEL_WEIGHTS]))


def _pretraining(features, outputs):
  return losses.pretraining_loss(features, outputs)["loss"]


# Each model family's loss: (features: inputs and labels, outputs) -> float32 scalar, the
# batch mean of the family's per-example loss from bert_tf.losses.
LOSSES = {
    "encoder": lambda features, outputs: mean_square_loss(outputs, features),
    "pretraining": _pretraining,
    "classification": _classification,
    "regression": _regression,
    "span": _span,
    "tagging": _tagging,
    "multiple_choice": _classification,
}


def make_labels(family, inputs, outputs, seed=0):
  """Random valid labels of `family` for a batch, as NumPy arrays.

  Args:
    family: a key of LOSSES.
    inputs: the model's input dict, int32 arrays [B, T] ([B, C, T] for multiple choice).
    outputs: the model's outputs on them (NumPy), which give the number of classes.

  Returns:
    dict of label arrays (empty for the encoder, whose loss needs none).
  """
  rng = np.random.default_rng(seed)
  mask = inputs[constants.INPUT_MASK]
  batch = mask.shape[0]
  if family in ("classification", "multiple_choice"):
    return {constants.LABEL_IDS: rng.integers(0, outputs["logits"].shape[-1], batch,
                                              dtype=np.int32)}
  if family == "regression":
    return {constants.LABEL_IDS: rng.uniform(0.0, 5.0, batch).astype(np.float32)}
  if family == "span":
    lengths = mask.sum(-1)
    return {START_POSITIONS: rng.integers(0, lengths, dtype=np.int32),
            END_POSITIONS: rng.integers(0, lengths, dtype=np.int32)}
  if family == "tagging":
    labels = rng.integers(0, outputs["logits"].shape[-1], mask.shape, dtype=np.int32)
    return {constants.LABEL_IDS: labels * mask, LABEL_WEIGHTS: mask.astype(np.float32)}
  if family == "pretraining":
    shape = inputs[constants.MASKED_LM_POSITIONS].shape
    weights = np.ones(shape, np.float32)
    weights[:, -1] = 0.0  # A padded prediction slot, which the loss must leave out.
    return {constants.MASKED_LM_IDS: rng.integers(
                0, outputs[constants.MLM_LOGITS].shape[-1], shape, dtype=np.int32),
            constants.MASKED_LM_WEIGHTS: weights,
            constants.NEXT_SENTENCE_LABELS: rng.integers(0, 2, batch, dtype=np.int32)}
  return {}


class FamilyLossModel(keras.Model):
  """Trains `model` with Keras's own trainer (fit, train_on_batch) on a family loss.

  Called on a batch dict of inputs and labels, it passes the model its inputs;
  `compute_loss` is LOSSES[family] on the whole batch and the outputs. Its weights are
  the model's.
  """

  def __init__(self, model, family, **kwargs):
    super().__init__(**kwargs)
    self.model = model
    self.family = family
    self.model_input_names = [x.name for x in model.inputs]

  def call(self, features, training=False):
    return self.model({name: features[name] for name in self.model_input_names},
                      training=training)

  def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
    del y, sample_weight, training
    return LOSSES[self.family](x, y_pred)


def flat_outputs(outputs):
  """{name: tensor or list of tensors} -> {name or name/i: float32 NumPy array}."""
  flat = {}
  for name, value in outputs.items():
    if isinstance(value, (list, tuple)):
      flat.update({f"{name}/{i}": ops.convert_to_numpy(v) for i, v in enumerate(value)})
    else:
      flat[name] = ops.convert_to_numpy(value)
  return flat


def variable_values(model):
  """{variable path: NumPy array} of every weight of `model`."""
  return {v.path: ops.convert_to_numpy(v) for v in model.weights}


def _load(folder, name):
  with open(os.path.join(folder, f"{name}.json")) as f:
    case = json.load(f)
  model = keras.saving.deserialize_keras_object(case["model"])
  model.load_weights(os.path.join(folder, f"{name}.weights.h5"))
  with np.load(os.path.join(folder, f"{name}.npz")) as batch:
    batch = dict(batch)
  return case, model, batch


class DenseAdamW(keras.optimizers.AdamW):
  """Keras's AdamW, given every gradient dense.

  On TensorFlow the gradient of an embedding lookup is a tf.IndexedSlices with one row
  per lookup, and Keras 3's Adam squares the rows one by one (`ops.square` of
  IndexedSlices), so a token looked up twice gets the second moment g1^2 + g2^2 instead
  of (g1 + g2)^2: not Adam, and not what JAX and torch compute (bert_tf's own trainer
  makes its gradients dense too). Summing the rows first gives Adam on every backend.
  """

  def apply(self, grads, trainable_variables=None):
    if keras.backend.backend() == "tensorflow":
      import tensorflow as tf  # pylint: disable=g-import-not-at-top
      grads = [g if g is None else tf.convert_to_tensor(g) for g in grads]
    return super().apply(grads, trainable_variables)


def _optimizer():
  return DenseAdamW(LEARNING_RATE, weight_decay=WEIGHT_DECAY, epsilon=ADAM_EPSILON)


def run_case(folder, name, backend):
  """One model on this process's backend: outputs, loss, one step (and a fit on torch).

  Writes {name}.{backend}.npz (the outputs before and after the step, prefixed
  `before/` and `after/`) and {name}.{backend}.weights.h5 (the weights after the step);
  returns a JSON-able dict of the losses, timings and, on torch, the fit's results.
  """
  start = time.perf_counter()
  case, model, batch = _load(folder, name)
  family = case["family"]
  inputs = {x.name: batch[x.name] for x in model.inputs}
  outputs = model(inputs, training=False)
  before = flat_outputs(outputs)
  result = {"loss": float(LOSSES[family](batch, outputs))}

  trainer = FamilyLossModel(model, family)
  # Eager: one step costs less than tracing (TensorFlow) or compiling (JAX) a whole
  # step for each model, and the numbers are the same ops'.
  trainer.compile(optimizer=_optimizer(), run_eagerly=True)
  with warnings.catch_warnings():
    # A head on the sequence output leaves the pooler without a gradient, as expected.
    warnings.filterwarnings("ignore", message="Gradients do not exist")
    result["train_on_batch_loss"] = float(trainer.train_on_batch(batch))
  after = flat_outputs(model(inputs, training=False))
  model.save_weights(os.path.join(folder, f"{name}.{backend}.weights.h5"))
  np.savez(os.path.join(folder, f"{name}.{backend}.npz"),
           **{f"before/{k}": v for k, v in before.items()},
           **{f"after/{k}": v for k, v in after.items()})
  result["step_seconds"] = time.perf_counter() - start

  if backend == "torch":
    start = time.perf_counter()
    result["fit"] = fit(model, family, batch)
    result["fit_seconds"] = time.perf_counter() - start
  return result


def fit(model, family, batch):
  """`model.fit` on `batch` for FIT_EPOCHS one-batch epochs, with LOSSES[family].

  Returns:
    {"losses": the epochs' losses, "trainable": the trainable variables' paths,
    "unchanged": the paths of those the fit left as they were}.
  """
  initial = variable_values(model)
  trainer = FamilyLossModel(model, family)
  trainer.compile(optimizer=_optimizer())
  size = len(batch[constants.INPUT_MASK])
  history = trainer.fit(batch, batch_size=size, epochs=FIT_EPOCHS, shuffle=False,
                        verbose=0)
  return {"losses": [float(x) for x in history.history["loss"]],
          "trainable": sorted(v.path for v in model.trainable_variables),
          "unchanged": sorted(v.path for v in model.trainable_variables
                              if np.array_equal(ops.convert_to_numpy(v), initial[v.path]))}


def run(folder, backend=None):
  """Runs every model in `folder` (one `{name}.json` each) on this process's backend.

  Returns {name: run_case's result, or {"error": traceback}}; also writes it to
  results.{backend}.json.
  """
  backend = backend or keras.backend.backend()
  names = sorted(f[:-len(".json")] for f in os.listdir(folder)
                 if f.endswith(".json") and not f.startswith("results."))
  results = {}
  for name in names:
    try:
      results[name] = run_case(folder, name, backend)
    except Exception:  # pylint: disable=broad-except
      results[name] = {"error": traceback.format_exc()}
  with open(os.path.join(folder, f"results.{backend}.json"), "w") as f:
    json.dump(results, f)
  return results


if __name__ == "__main__":
  run(sys.argv[1])
