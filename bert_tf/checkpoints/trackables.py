"""Checkpoint items as TensorFlow trackables.

A model's checkpoint items are Keras layers and models, which tf.train.Checkpoint
tracks as they are, or plain containers of Keras variables that every backend shares
(LoRA's adapters: bert_tf.models.lora.Adapters), which declare their layout with
`checkpoint_structure()`. `as_trackable` gives tf.train.Checkpoint an object of that
layout, so that checkpoint keys stay what they were when the container was a tf.Module.
"""

from typing import Dict, Mapping

import tensorflow as tf


def _tf_values(structure):
  """The nested dict/list `structure` with each Keras variable replaced by the
  tf.Variable behind it."""
  if isinstance(structure, Mapping):
    return {key: _tf_values(value) for key, value in structure.items()}
  if isinstance(structure, (list, tuple)):
    return [_tf_values(value) for value in structure]
  return getattr(structure, "value", structure)


def as_trackable(item):
  """`item` if TensorFlow tracks it, else a tf.Module holding its
  `checkpoint_structure()` (attribute name -> nested dicts/lists of variables)."""
  if isinstance(item, tf.__internal__.tracking.Trackable):
    return item
  module = tf.Module(name=getattr(item, "name", None))
  for attribute, value in item.checkpoint_structure().items():
    setattr(module, attribute, _tf_values(value))
  return module


def as_trackables(items: Mapping[str, object]) -> Dict[str, object]:
  """{name: as_trackable(item)} of a model's checkpoint items."""
  return {name: as_trackable(item) for name, item in items.items()}
