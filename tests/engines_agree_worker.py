"""One engine's side of tests/training/test_engines_agree.py, run as
`KERAS_BACKEND=tensorflow|jax python tests/engines_agree_worker.py COMMAND ARGS...` (Keras
fixes its backend per process). Each command prints one line `RESULT <json>` last.

  train CONFIG_YAML START_H5 OUT_NPZ STEPS
      the engine's trainer from the weights of a portable checkpoint to STEPS, one step
      per loop; OUT_NPZ holds `loss` (of the steps run) and `weights/<variable path>`
      after the last step
  updates CASE_JSON OUT_NPZ                 the JAX engine's optimizer
      (bert_tf.training.jax_engine.optimizer) through the steps of CASE_JSON; OUT_NPZ
      holds `<algorithm>/<step>/weights|state|logs/<name>` after each step
"""

import json
import os
import sys
import tempfile

import keras
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bert_tf.checkpoints import portable_restore  # pylint: disable=g-import-not-at-top
from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
from bert_tf.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top


def _result(value) -> None:
  print("RESULT " + json.dumps(value), flush=True)


def _trainer(experiment, model_dir):
  return trainer_lib.Trainer(experiment, model_dir, log_fn=lambda line: None)


def train(config_path: str, start: str, out_path: str, steps: str) -> dict:
  """Trains to `steps` one step per loop, from the weights of the portable checkpoint
  `start`."""
  experiment = experiments.experiment_from_yaml(config_path)
  with tempfile.TemporaryDirectory() as model_dir:
    trainer = _trainer(experiment, model_dir)
    trainer.initialize()
    model = trainer.model
    portable_restore.restore_items(start, model.trained_items, tuple(model.trained_items))
    trainer.engine.state_restored()
    losses = [trainer.train(train_steps=step)["loss"] for step in range(1, int(steps) + 1)]
    trainer.engine.checkpoint_state()
    arrays = {f"weights/{v.path}": keras.ops.convert_to_numpy(v)
              for v in model.trainable_variables}
  np.savez(out_path, loss=np.asarray(losses, np.float64), **arrays)
  return {"backend": keras.backend.backend()}


def updates(case_path: str, out_path: str) -> dict:
  """Runs the JAX engine's optimizer through the case's steps, for each algorithm.

  The case: {"variables": {path: values}, "steps": [{path: gradient}, ...] (a null
  gradient is NaN), "learning_rate", "weight_decay_rate", "exclude", "global_clipnorm",
  "algorithms", "loss_scale" (LossScaleRule's arguments: each algorithm again as
  `<algorithm>_scaled`, its gradients times the scale)}.
  """
  import jax  # pylint: disable=g-import-not-at-top
  from bert_tf.training.loss_scale_rule import LossScaleRule  # pylint: disable=g-import-not-at-top
  from bert_tf.training.schedules import WarmupPolynomialDecay  # pylint: disable=g-import-not-at-top
  from bert_tf.training.jax_engine.optimizer import StatelessOptimizer  # pylint: disable=g-import-not-at-top
  from bert_tf.training.update_rule import UpdateRule  # pylint: disable=g-import-not-at-top
  with open(case_path, encoding="utf-8") as f:
    case = json.load(f)
  paths = list(case["variables"])
  out = {}
  runs = [(a, None) for a in case["algorithms"]]
  if case.get("loss_scale"):  # The same steps under a dynamic loss scale.
    runs += [(a, LossScaleRule(**case["loss_scale"])) for a in case["algorithms"]]
  for algorithm, loss_scale in runs:
    key = algorithm if loss_scale is None else f"{algorithm}_scaled"
    variables = []
    for path in paths:
      scope, name = path.rsplit("/", 1)
      with keras.name_scope(scope):
        variables.append(keras.Variable(np.asarray(case["variables"][path], np.float32),
                                        name=name))
    rule = UpdateRule(algorithm, WarmupPolynomialDecay(case["learning_rate"], 0, 0),
                      weight_decay_rate=case["weight_decay_rate"],
                      exclude_from_weight_decay=case["exclude"])
    optimizer = StatelessOptimizer(rule, case["global_clipnorm"], loss_scale)
    optimizer.build(variables)
    apply = jax.jit(optimizer.apply)
    values = [v.value for v in optimizer.variables]
    trainable = [v.value for v in variables]
    for i, step in enumerate(case["steps"]):
      # As the step computes them: the gradients of the loss times the scale.
      scale = 1.0 if loss_scale is None else optimizer.loss_scale(values)
      grads = [np.asarray(np.nan if step[p] is None else step[p], np.float32) * scale *
               np.ones(v.shape, np.float32) for p, v in zip(paths, variables)]
      trainable, values, logs = apply(values, trainable, grads, np.float32(1.0))
      for path, value in zip(paths, trainable):
        out[f"{key}/{i}/weights/{path}"] = np.asarray(value)
      for name, value in zip(optimizer.state_names, values):
        out[f"{key}/{i}/state/{name}"] = np.asarray(value)
      for name, value in logs.items():
        out[f"{key}/{i}/logs/{name}"] = np.asarray(value)
  np.savez(out_path, **out)
  return {"backend": keras.backend.backend()}


if __name__ == "__main__":
  command, args = sys.argv[1], sys.argv[2:]
  _result({"train": train, "updates": updates}[command](*args))
