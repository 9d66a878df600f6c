"""Tiny pretraining experiments shared by the trainer tests."""

import copy
import os

import numpy as np

from bert_tf import configs
from bert_tf.training import experiments

TINY_ENCODER = dict(vocab_size=100, hidden_size=32, num_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=32, dropout_rate=0.0,
                    attention_dropout_rate=0.0)


def tiny_experiment_dict(batch=8, seq=16, predictions=4, steps=4, strategy="one_device",
                         **sections):
  """A nested dict of a tiny pretraining experiment on dummy data; `sections` are
  merged into the dict ({"trainer": {...}, ...})."""
  data = dict(format="dummy", global_batch_size=batch, seq_length=seq,
              max_predictions_per_seq=predictions)
  base = dict(
      task=dict(name="pretraining"),
      model=dict(encoder=dict(TINY_ENCODER)),
      train_data=dict(data),
      eval_data=dict(data, is_training=False, drop_remainder=False),
      optimizer=dict(type="adamw", learning_rate=1e-3, warmup_steps=2),
      trainer=dict(train_steps=steps, steps_per_loop=2, summary_interval=2, log_interval=2,
                   checkpoint_interval=2, max_to_keep=3),
      runtime=dict(distribution_strategy=strategy, seed=7))
  for section, values in sections.items():
    merged = copy.deepcopy(base.get(section, {}))
    if isinstance(values, dict) and section != "task":
      for key, value in values.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
          merged[key].update(value)
        else:
          merged[key] = value
    else:
      merged = values
    base[section] = merged
  return base


def tiny_experiment(**kwargs) -> configs.ExperimentConfig:
  return experiments.experiment_from_dict(tiny_experiment_dict(**kwargs))


def weights_of(model):
  """{variable path: numpy value} of a model's trainable variables."""
  return {v.path: np.asarray(v.numpy()) for v in model.trainable_variables}


def assert_weights_close(a, b, atol=1e-6, rtol=1e-5):
  assert a.keys() == b.keys()
  for key in a:
    np.testing.assert_allclose(a[key], b[key], atol=atol, rtol=rtol, err_msg=key)


def train_loop_graph(engine):
  """The TensorFlow engine's training loop traced for its iterator and a scalar int32
  step count (a ConcreteFunction, to inspect its graph); starts the input."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return engine.train_loop_function.get_concrete_function(
      engine.training_input().iterator, tf.TensorSpec([], tf.int32))


def write_dropout_experiment(directory, steps: int, max_to_keep: int) -> str:
  """`directory/tiny.yaml`: the tiny experiment with dropout 0.1 (a resume must restore
  the random state to continue bit-exactly), checkpoints every 2 steps; returns its
  path."""
  import yaml  # pylint: disable=g-import-not-at-top
  path = os.path.join(str(directory), "tiny.yaml")
  with open(path, "w", encoding="utf-8") as f:
    yaml.safe_dump(tiny_experiment_dict(
        steps=steps, model=dict(encoder=dict(TINY_ENCODER, dropout_rate=0.1)),
        trainer=dict(max_to_keep=max_to_keep)), f)
  return path
