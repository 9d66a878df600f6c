"""The kernel protocol (bert_tf.kernels.protocol): the layers compose the hooks of the
Kernels object they are built with, and a Kernels that overrides nothing computes what
the reference layers compute (kernels=None), bit for bit."""

import collections

import keras
import numpy as np

from bert_tf.kernels import protocol
from bert_tf.models import BertEncoder
from bert_tf.models import BertPretrainer

_TINY = dict(vocab_size=60, hidden_size=16, num_layers=2, num_attention_heads=2,
             intermediate_size=32, max_position_embeddings=24)
_HOOKS = ("dropout", "layer_norm", "dense", "attention", "residual_layer_norm",
          "vocabulary_logits")


class _Counting(protocol.Kernels):
  """The reference hooks, counting their calls."""

  name = "counting"

  def __init__(self):
    self.calls = collections.Counter()
    for hook in _HOOKS:
      setattr(self, hook, self._counted(hook, getattr(self, hook)))

  def _counted(self, hook, method):
    def call(*args, **kwargs):
      self.calls[hook] += 1
      return method(*args, **kwargs)
    return call


def _inputs():
  rng = np.random.default_rng(0)
  return {"input_word_ids": rng.integers(1, 60, (2, 8)).astype(np.int32),
          "input_mask": np.array([[1] * 8, [1] * 5 + [0] * 3], np.int32),
          "input_type_ids": rng.integers(0, 2, (2, 8)).astype(np.int32),
          "masked_lm_positions": np.array([[1, 2], [3, 4]], np.int32)}


def _pretrainer(kernels):
  keras.utils.set_random_seed(0)
  return BertPretrainer(BertEncoder(**_TINY, kernels=kernels))


def test_a_kernels_object_that_overrides_nothing_computes_the_reference_exactly():
  counting = _Counting()
  outputs = _pretrainer(counting)(_inputs(), training=False)
  reference = _pretrainer(None)(_inputs(), training=False)
  for name in outputs:
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(outputs[name]),
                                  keras.ops.convert_to_numpy(reference[name]))
  layers = _TINY["num_layers"]
  # Per block: one attention, two residual ends, the widening layer; the masked-LM
  # head's transform and its product with the table; every LayerNorm (the embeddings',
  # two per block, the head's) and every dropout (the embeddings', three per block, the
  # next-sentence head's) through the hooks.
  assert counting.calls == {"attention": layers, "residual_layer_norm": 2 * layers,
                            "dense": layers + 1, "vocabulary_logits": 1,
                            "layer_norm": 2 * layers + 2, "dropout": 3 * layers + 2}
