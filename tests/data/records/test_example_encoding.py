"""Example encoding with numpy against the protobuf library's bytes."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.records import example_encoding


def test_serialized_examples_equal_protobuf_for_every_varint_width():
  rng = np.random.default_rng(3)
  n = 300
  features = {
      # Token ids of a BERT-sized vocab: 1-3 byte varints through the lookup table.
      "ids": rng.integers(0, 30522, (n, 64)),
      # Sparse large values: 1-9 byte varints computed directly.
      "wide": np.where(rng.random((n, 5)) < 0.5, rng.integers(0, 2**62, (n, 5)),
                       rng.integers(0, 200, (n, 5))),
      "bytes": rng.integers(0, 128, (n, 3)),
      "weights": rng.random((n, 4)).astype(np.float32),
      "label": rng.integers(0, 2, n),
  }
  records = example_encoding.serialize_examples(features)
  assert len(records) == n
  for i in range(n):
    expected = tf.train.Example(features=tf.train.Features(feature={
        name: (tf.train.Feature(float_list=tf.train.FloatList(value=value[i].tolist()))
               if value.dtype == np.float32 else
               tf.train.Feature(int64_list=tf.train.Int64List(
                   value=[int(v) for v in np.atleast_1d(value[i])])))
        for name, value in features.items()}))
    assert tf.train.Example.FromString(records[i]) == expected


def test_serializing_a_negative_value_is_an_error_naming_the_feature():
  with pytest.raises(ValueError, match="segment_ids"):
    example_encoding.serialize_examples({"segment_ids": np.array([[0, -1]])})
