"""How batches of fine-tuning features are padded, for the tf.data and NumPy inputs alike.

Which features have a token axis and what each is padded with is the record kind's word
(its spec's `token_fill`s, bert_tf.data.records.record_specs.token_fills, handed in as
`fills`); this module says the length a batch is padded to with length buckets: a batch
cut to its longest example is padded up to the smallest bound that holds it, so that
batches come in as many lengths as there are bounds, which is what a step compiled once
per shape (XLA, JAX, TPUs) needs.
`bert_tf.data.pipelines.batching` applies this in tf.data, `pad_batch_to_bucket` in NumPy.
Importing this module needs no TensorFlow.
"""

from typing import Dict, List, Mapping, Sequence

import numpy as np

from bert_tf import constants


def pad_example(features: Mapping[str, np.ndarray], fills: Mapping[str, object],
                seq_length: int) -> Dict[str, np.ndarray]:
  """One featurized example (a record kind's featurize) with each feature of
  `fills` ([T_i] or [C, T_i]: a token axis last) padded to seq_length with its value
  there (a record kind's token_fills); the others unchanged."""
  out = {}
  for key, value in features.items():
    value = np.asarray(value)
    if key in fills:
      width = [(0, 0)] * (value.ndim - 1) + [(0, seq_length - value.shape[-1])]
      value = np.pad(value, width, constant_values=fills[key])
    out[key] = value
  return out


def bucket_bounds(data_config) -> List[int]:
  """The lengths batches are padded to: data_config.length_buckets below seq_length,
  then seq_length."""
  return [*data_config.active_length_buckets(), data_config.seq_length]


def bucket_lengths(bounds: Sequence[int]) -> np.ndarray:
  """int32 [bounds[-1] + 1]: for each length 0..bounds[-1], the smallest of `bounds`
  at least that long: the one table both inputs look a batch's padded length up in."""
  bounds = np.asarray(bounds, np.int32)
  lengths = np.arange(int(bounds[-1]) + 1)
  return bounds[np.searchsorted(bounds, lengths, side="left")]


def longest_example(batch: Mapping[str, np.ndarray]) -> int:
  """The tokens of a batch's longest example (at least 1), from its input_mask."""
  return max(int(np.max(np.sum(batch[constants.INPUT_MASK], axis=-1), initial=0)), 1)


def pad_batch_to_bucket(batch: Mapping[str, np.ndarray], lengths: np.ndarray,
                        fills: Mapping[str, object]) -> Dict[str, np.ndarray]:
  """A NumPy batch cut to its longest example and padded to its bucket.

  Args:
    batch: features as bert_tf.data.pipelines.batching describes them, token features
      [B, T] or [B, C, T].
    lengths: `bucket_lengths(bounds)`; None cuts the batch to its longest example only.
    fills: {feature: fill} of the batch's features with a token axis (the record kind's
      token_fills); the others are left as they are.

  Returns:
    the batch with each token feature's last axis the bucket's length, the tokens past
    the longest example filled with its fill (what batching.trim_to_longest then
    batching.pad_to_length_bucket give in tf.data).
  """
  longest = longest_example(batch)
  target = longest if lengths is None else int(lengths[min(longest, len(lengths) - 1)])
  out = dict(batch)
  for key in (key for key in fills if key in batch):
    value = batch[key][..., :min(longest, target)]
    pad = [(0, 0)] * (value.ndim - 1) + [(0, target - value.shape[-1])]
    out[key] = np.pad(value, pad, constant_values=fills[key])
  return out
