"""The definitions both engines' steps share (bert_tf.training.steps), and each engine
holding to them."""

import numpy as np
import pytest

from bert_tf.training import steps


def _rows_of(split, rows, num):
  """The row indices of each micro-batch an engine's split makes of a [rows, 2] batch."""
  batch = np.stack([np.arange(rows), np.arange(rows)], axis=1).astype(np.int32)
  return np.asarray(split(batch, num))[..., 0]


def test_each_engine_splits_micro_batches_in_the_order_steps_names_for_it():
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.training.jax_engine import step as jax_step  # pylint: disable=g-import-not-at-top
  from bert_tf.training.tf_engine import step as tf_step  # pylint: disable=g-import-not-at-top

  tf_rows = _rows_of(lambda x, n: tf_step.split_micro_batches(tf.constant(x), n), 12, 3)
  jax_rows = _rows_of(lambda x, n: jax_step._micro_batches({"x": jnp.asarray(x)}, n)["x"],
                      12, 3)
  np.testing.assert_array_equal(tf_rows, steps.micro_batch_rows(12, 3, steps.TENSORFLOW_ORDER))
  np.testing.assert_array_equal(jax_rows, steps.micro_batch_rows(12, 3, steps.JAX_ORDER))
  assert steps.micro_batch_rows(6, 2, steps.CONTIGUOUS).tolist() == [[0, 1, 2], [3, 4, 5]]
  assert steps.micro_batch_rows(6, 2, steps.STRIDED).tolist() == [[0, 2, 4], [1, 3, 5]]


def test_a_tensorflow_batch_of_unknown_rows_splits_in_the_graph():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.training.tf_engine import step as tf_step  # pylint: disable=g-import-not-at-top

  split = tf.function(lambda x: tf_step.split_micro_batches(x, 2),
                      input_signature=[tf.TensorSpec([None, 3], tf.int32)])
  out = split(tf.reshape(tf.range(12), [4, 3]))
  assert out.shape == (2, 2, 3) and out.numpy()[1, 0].tolist() == [6, 7, 8]


def test_output_keys_put_the_task_outputs_before_the_update_outputs():
  assert steps.output_keys(["loss"], ["accuracy"], with_loss_scale=True) == [
      "loss", "accuracy/numerator", "accuracy/denominator", "gradient_norm",
      "learning_rate", "non_finite_loss_steps", "skipped_steps", "loss_scale"]
  assert steps.flat_outputs({"loss": 1.0}, {"accuracy": (2.0, 4.0)}) == {
      "loss": 1.0, "accuracy/numerator": 2.0, "accuracy/denominator": 4.0}
