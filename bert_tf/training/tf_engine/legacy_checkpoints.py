"""Resuming from the TensorFlow checkpoints (`ckpt-N.index`, `ckpt-N.data-*`) that
older versions of the TensorFlow trainer wrote, on the TensorFlow engine only (the
checkpoint saver, bert_tf.training.checkpointing, calls it where it finds one); runs
continue in the portable format. Their root children: the model's checkpoint items,
`optimizer`, `step`, `loss_scale` (mixed_float16), `random_state` and `iterator`."""

import logging
from typing import Dict, Mapping, Optional, Sequence

import tensorflow as tf

from bert_tf.checkpoints import restore as restore_lib
from bert_tf.checkpoints import tf_checkpoints
from bert_tf.checkpoints import trackables
from bert_tf.training import steps

# Items a trainer checkpoint may lack without being wrong: checkpoints written before
# they were saved resume without them.
OPTIONAL_ITEMS = ("random_state", "iterator")


def newest_readable(model_dir: str) -> Optional[str]:
  """The newest TensorFlow checkpoint in model_dir that reads in full (damaged newer ones
  are skipped with a warning naming them), or None."""
  return tf_checkpoints.newest_readable_checkpoint(model_dir)


def trainer_items(model, optimizer, step: tf.Variable, loss_scale,
                  random_state: Sequence) -> Dict[str, object]:
  """{root child: trackable} of the TensorFlow trainer's checkpoints."""
  items = trackables.as_trackables(model.trained_items)
  items.update(optimizer=optimizer, step=step)
  if loss_scale is not None:
    items["loss_scale"] = loss_scale
  if random_state:
    items["random_state"] = list(random_state)
  return items


def restore(prefix: str, items: Mapping[str, object],
            optional: Sequence[str] = OPTIONAL_ITEMS) -> None:
  """Restores `items` from the checkpoint at `prefix`; names in `optional` that the
  checkpoint lacks keep their current state, with a log line."""
  available = restore_lib.checkpoint_children(prefix)
  absent = [name for name in optional if name in items and name not in available]
  if absent:
    logging.info("Checkpoint %s holds no %s (written by an older version)", prefix,
                 ", ".join(absent))
  present = {name: value for name, value in items.items() if name not in absent}
  status = tf.train.Checkpoint(**present).read(prefix)
  status.assert_existing_objects_matched()
  status.expect_partial()


def restore_trainer(engine, prefix: str) -> int:
  """Restores a TensorFlow engine's model, optimizer, step, loss scale and random state
  from the checkpoint at `prefix`; returns its step.

  Args:
    engine: a bert_tf.training.tf_engine.engine.TensorFlowEngine, built.
  """
  restore(prefix, trainer_items(engine.model, engine.optimizer, engine.step_variable,
                                engine.loss_scale, steps.seed_states(engine.model)))
  return engine.step
