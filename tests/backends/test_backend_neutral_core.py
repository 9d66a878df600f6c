"""The model core imports no TensorFlow: with KERAS_BACKEND=jax and TensorFlow made
unimportable, every model builds, computes its loss (bert_tf.losses) and trains one
jit-compiled step (bert_tf.training.jax_engine.step with the JAX engine's AdamW and the
project's schedule). Runs tests/tensorflow_free_check.py in a subprocess, since this process
has Keras on TensorFlow."""

import json
import math
import os
import pathlib
import subprocess
import sys

import pytest

import paths

ROOT = pathlib.Path(paths.ROOT)
MODELS = ("encoder", "pretrainer", "classifier", "regression", "span_labeler",
          "token_classifier", "multiple_choice", "lora_classifier")


@pytest.mark.slow  # every model, in a process without TensorFlow
def test_every_model_builds_computes_its_loss_and_trains_on_jax_without_tensorflow():
  env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu",
             PYTHONPATH=str(ROOT))
  result = subprocess.run([sys.executable, str(ROOT / "tests" / "tensorflow_free_check.py")],
                          env=env, capture_output=True, text=True, timeout=600,
                          check=False)
  assert result.returncode == 0, result.stderr[-4000:]
  results = json.loads(result.stdout.strip().splitlines()[-1])
  assert set(results) == set(MODELS)
  for name, values in results.items():
    assert math.isfinite(values["loss"]), name
    assert values["changed"], f"{name}: one optimizer step changed no weight"
