"""The BERT initializer: a truncated normal drawn with NumPy, the same on every backend
for the same seed (tests/integration/test_engine_move.py builds a model on both)."""

import keras
import numpy as np

from bert_tf.layers import initializers


def test_values_lie_within_two_deviations_with_the_truncated_spread():
  keras.utils.set_random_seed(0)
  values = keras.ops.convert_to_numpy(initializers.bert_initializer(0.02)((400, 500)))
  assert values.dtype == np.float32 and values.shape == (400, 500)
  assert np.abs(values).max() <= 0.04
  # A normal cut at two deviations keeps 0.880 of its standard deviation.
  np.testing.assert_allclose(values.std(), 0.02 * 0.8796, rtol=0.01)
  assert abs(values.mean()) < 2e-4


def test_the_same_seed_draws_the_same_values_and_the_config_round_trips():
  init = initializers.bert_initializer(0.05)
  keras.utils.set_random_seed(3)
  first = keras.ops.convert_to_numpy(init((7, 3)))
  keras.utils.set_random_seed(3)
  np.testing.assert_array_equal(first, keras.ops.convert_to_numpy(init((7, 3))))
  again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(init))
  assert isinstance(again, initializers.TruncatedNormal) and again.stddev == 0.05
