"""The TensorFlow engine's evaluation: the task's eval outputs of every replica,
gathered to the host batch by batch."""

from typing import Dict, List

import keras
import numpy as np
import tensorflow as tf

from bert_tf.tasks import base as task_base


def make_eval_step(strategy: tf.distribute.Strategy, model: keras.Model,
                   task: task_base.Task):
  """The tf.function eval_step(distributed batch) -> {output: [global batch, ...]}: the
  task's eval outputs of every replica, gathered."""

  def replica_eval(features):
    outputs = model(task.model_inputs(features), training=False)
    return task.eval_outputs(features, outputs)

  # Batches are padded to their longest example: without reduce_retracing every new
  # length would trace the step again.
  @tf.function(reduce_retracing=True)
  def eval_step(features):
    per_replica = strategy.run(replica_eval, args=(features,))
    # Gathered one tensor at a time: strategy.gather of the whole dict returns only
    # the first replica's values under MirroredStrategy in TF 2.21.
    return {key: strategy.gather(value, axis=0) for key, value in per_replica.items()}

  return eval_step


def gather_outputs(eval_step, dataset, steps: int) -> Dict[str, List[np.ndarray]]:
  """eval_step's outputs over the distributed `dataset` (its first `steps` batches; 0:
  all), as {output: [one array per batch]}."""
  gathered: Dict[str, list] = {}
  for i, features in enumerate(dataset):
    if steps and i >= steps:
      break
    for key, value in eval_step(features).items():
      gathered.setdefault(key, []).append(np.asarray(value))
  return gathered
