"""One engine's side of tests/training/test_engines_agree.py, run as
`KERAS_BACKEND=tensorflow|jax python tests/engine_worker.py COMMAND ARGS...` (Keras
fixes its backend per process). Each command prints one line `RESULT <json>` last.

  train CONFIG_YAML INIT_H5 OUT_NPZ STEPS   the engine's trainer from the weights of
      INIT_H5 (written first when absent), STEPS steps one at a time; OUT_NPZ holds
      `loss` [STEPS] and `weights/<variable path>` after the last step
  updates CASE_JSON OUT_NPZ                 the JAX engine's optimizer
      (bert_tf.training.stateless_optimizer) through the steps of CASE_JSON; OUT_NPZ
      holds `<algorithm>/<step>/<variable path>` and the state after each step
"""

import json
import os
import sys
import tempfile

import keras
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bert_tf.checkpoints import portable  # pylint: disable=g-import-not-at-top
from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top


def _result(value) -> None:
  print("RESULT " + json.dumps(value), flush=True)


def _trainer(experiment, model_dir):
  if keras.backend.backend() == "jax":
    from bert_tf.training import jax_trainer  # pylint: disable=g-import-not-at-top
    return jax_trainer.JaxTrainer(experiment, model_dir, log_fn=lambda line: None)
  from bert_tf.training import trainer  # pylint: disable=g-import-not-at-top
  return trainer.Trainer(experiment, model_dir, log_fn=lambda line: None)


def train(config_path: str, init_path: str, out_path: str, steps: str) -> dict:
  """Trains `steps` steps one loop each, from the weights of init_path."""
  experiment = experiments.experiment_from_yaml(config_path)
  with tempfile.TemporaryDirectory() as model_dir:
    trainer = _trainer(experiment, model_dir)
    trainer.initialize()
    items = trainer.model.trained_items
    if os.path.exists(init_path):
      portable.restore_items(init_path, items, tuple(items))
    else:
      portable.save(init_path, items)
    if keras.backend.backend() == "jax":
      from bert_tf.training import jax_step  # pylint: disable=g-import-not-at-top
      trainer.state = jax_step.state_from(trainer.model, trainer.optimizer)
    losses = [trainer.train(train_steps=step)["loss"] for step in range(1, int(steps) + 1)]
    if keras.backend.backend() == "jax":
      trainer.sync_model()
    arrays = {f"weights/{v.path}": keras.ops.convert_to_numpy(v)
              for v in trainer.model.trainable_variables}
  np.savez(out_path, loss=np.asarray(losses, np.float64), **arrays)
  return {"backend": keras.backend.backend()}


def updates(case_path: str, out_path: str) -> dict:
  """Runs the JAX engine's optimizer through the case's steps, for each algorithm.

  The case: {"variables": {path: values}, "steps": [{path: gradient}, ...] (a null
  gradient is NaN), "learning_rate", "weight_decay_rate", "exclude", "global_clipnorm",
  "algorithms"}.
  """
  import jax  # pylint: disable=g-import-not-at-top
  from bert_tf.training.schedules import WarmupPolynomialDecay  # pylint: disable=g-import-not-at-top
  from bert_tf.training.stateless_optimizer import StatelessOptimizer  # pylint: disable=g-import-not-at-top
  from bert_tf.training.update_rule import UpdateRule  # pylint: disable=g-import-not-at-top
  with open(case_path, encoding="utf-8") as f:
    case = json.load(f)
  paths = list(case["variables"])
  out = {}
  for algorithm in case["algorithms"]:
    variables = []
    for path in paths:
      scope, name = path.rsplit("/", 1)
      with keras.name_scope(scope):
        variables.append(keras.Variable(np.asarray(case["variables"][path], np.float32),
                                        name=name))
    rule = UpdateRule(algorithm, WarmupPolynomialDecay(case["learning_rate"], 0, 0),
                      weight_decay_rate=case["weight_decay_rate"],
                      exclude_from_weight_decay=case["exclude"])
    optimizer = StatelessOptimizer(rule, case["global_clipnorm"])
    optimizer.build(variables)
    apply = jax.jit(optimizer.apply)
    values = [v.value for v in optimizer.variables]
    trainable = [v.value for v in variables]
    for i, step in enumerate(case["steps"]):
      grads = [np.asarray(np.nan if step[p] is None else step[p], np.float32) *
               np.ones(v.shape, np.float32) for p, v in zip(paths, variables)]
      trainable, values, logs = apply(values, trainable, grads, np.float32(1.0))
      for path, value in zip(paths, trainable):
        out[f"{algorithm}/{i}/weights/{path}"] = np.asarray(value)
      for name, value in zip(optimizer.state_names, values):
        out[f"{algorithm}/{i}/state/{name}"] = np.asarray(value)
      for name, value in logs.items():
        out[f"{algorithm}/{i}/logs/{name}"] = np.asarray(value)
  np.savez(out_path, **out)
  return {"backend": keras.backend.backend()}


if __name__ == "__main__":
  command, args = sys.argv[1], sys.argv[2:]
  _result({"train": train, "updates": updates}[command](*args))
