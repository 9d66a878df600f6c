"""Switching a built model's speed path, for tests that compare both paths on one model."""

import contextlib


@contextlib.contextmanager
def kernels_of(model, kernels):
  """Within the block, every layer of `model` that takes a speed path (bert_tf.kernels)
  uses `kernels`; afterwards each has its own again. Only calls traced inside the block
  see the change."""
  layers = [layer for layer in model._flatten_layers()  # pylint: disable=protected-access
            if hasattr(layer, "kernels")]
  before = [layer.kernels for layer in layers]
  for layer in layers:
    layer.kernels = kernels
  try:
    yield
  finally:
    for layer, previous in zip(layers, before):
      layer.kernels = previous
