"""How batches of fine-tuning features are padded, for the tf.data and NumPy inputs alike.

Each feature's padding value, which features have a token axis, and the length a batch
is padded to with length buckets: a batch cut to its longest example is padded up to
the smallest bound that holds it, so that batches come in as many lengths as there are
bounds, which is what a step compiled once per shape (XLA, JAX, TPUs) needs.
`bert_tf.data.pipelines.batching` applies this in tf.data, `pad_batch_to_bucket` in NumPy.
Importing this module needs no TensorFlow.
"""

from typing import Dict, List, Mapping, Sequence

import numpy as np

from bert_tf import constants


def pad_example(features: Mapping[str, np.ndarray], pads: Mapping[str, object],
                token_features: Sequence[str], seq_length: int) -> Dict[str, np.ndarray]:
  """One featurized example (bert_tf.data.pipelines.featurizers) with each of its
  `token_features` ([T_i] or [C, T_i]) padded to seq_length with its value in `pads`
  (a record kind's padding_values)."""
  out = {}
  for key, value in features.items():
    value = np.asarray(value)
    if key in token_features:
      width = [(0, 0)] * (value.ndim - 1) + [(0, seq_length - value.shape[-1])]
      value = np.pad(value, width, constant_values=pads[key])
    out[key] = value
  return out


def token_axis_keys(batch: Mapping[str, object]) -> List[str]:
  """The features of a batch whose last axis is the token axis: the encoder inputs and,
  for tagging, the per-token label_ids [B, T]."""
  return [key for key, value in batch.items()
          if key in constants.ENCODER_INPUTS or (key == constants.LABEL_IDS and
                                                 len(value.shape) == 2)]


def token_fill(key: str) -> int:
  """The padding of a token-axis feature: IGNORE_LABEL for tagging labels, else 0."""
  return constants.IGNORE_LABEL if key == constants.LABEL_IDS else 0


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


def pad_batch_to_bucket(batch: Mapping[str, np.ndarray], lengths: np.ndarray
                        ) -> Dict[str, np.ndarray]:
  """A NumPy batch cut to its longest example and padded to its bucket.

  Args:
    batch: features as bert_tf.data.pipelines.batching describes them, token features [B, T] or
      [B, C, T].
    lengths: `bucket_lengths(bounds)`; None cuts the batch to its longest example only.

  Returns:
    the batch with each token feature's last axis the bucket's length, the tokens past
    the longest example filled with `token_fill` (what batching.trim_to_longest then
    batching.pad_to_length_bucket give in tf.data).
  """
  longest = longest_example(batch)
  target = longest if lengths is None else int(lengths[min(longest, len(lengths) - 1)])
  out = dict(batch)
  for key in token_axis_keys(batch):
    value = batch[key][..., :min(longest, target)]
    pad = [(0, 0)] * (value.ndim - 1) + [(0, target - value.shape[-1])]
    out[key] = np.pad(value, pad, constant_values=token_fill(key))
  return out
