"""BertEncoder: sizes, shapes, padding invariance, serialization, precision, seeds."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import harness
from bert_tf import configs
from bert_tf import constants
from bert_tf.data.pipelines import example_packing
from bert_tf.models import BertEncoder


@pytest.mark.parametrize("size,expected", [
    ("base", 109_482_240),
    pytest.param("large", 335_141_888, marks=pytest.mark.slow)])  # ~10 s to build
def test_parameter_count_equals_released_checkpoint(size, expected):
  encoder = BertEncoder.from_config_object(configs.EncoderConfig.from_size(size))
  assert encoder.count_params() == expected


def test_outputs_have_documented_shapes_and_names():
  encoder = harness.tiny_encoder()
  batch = harness.pretraining_batch(batch_size=3, seq_length=12)
  out = encoder(harness.encoder_inputs(batch))
  assert out[constants.SEQUENCE_OUTPUT].shape == (3, 12, 32)
  assert out[constants.POOLED_OUTPUT].shape == (3, 32)
  assert len(out[constants.ENCODER_OUTPUTS]) == 2
  np.testing.assert_allclose(out[constants.ENCODER_OUTPUTS][-1],
                             out[constants.SEQUENCE_OUTPUT], rtol=1e-6)


def test_outputs_at_real_tokens_do_not_change_when_padding_is_appended():
  encoder = harness.tiny_encoder()
  batch = harness.encoder_inputs(harness.pretraining_batch(batch_size=2, seq_length=10))
  padded = {k: tf.pad(v, [[0, 0], [0, 7]]) for k, v in batch.items()}
  short = encoder(batch)
  long = encoder(padded)
  mask = batch[constants.INPUT_MASK].numpy().astype(bool)
  np.testing.assert_allclose(long[constants.SEQUENCE_OUTPUT][:, :10][mask],
                             short[constants.SEQUENCE_OUTPUT][mask], atol=1e-5)
  np.testing.assert_allclose(long[constants.POOLED_OUTPUT], short[constants.POOLED_OUTPUT],
                             atol=1e-5)


def test_padding_keys_get_zero_attention_so_their_ids_do_not_matter():
  encoder = harness.tiny_encoder()
  batch = harness.encoder_inputs(harness.pretraining_batch(batch_size=2, seq_length=10))
  mask = batch[constants.INPUT_MASK]
  scrambled = dict(batch)
  scrambled[constants.INPUT_WORD_IDS] = tf.where(
      mask == 1, batch[constants.INPUT_WORD_IDS], 77)
  a = encoder(batch)[constants.SEQUENCE_OUTPUT].numpy()[mask.numpy() == 1]
  b = encoder(scrambled)[constants.SEQUENCE_OUTPUT].numpy()[mask.numpy() == 1]
  np.testing.assert_allclose(a, b, atol=1e-6)


CASE = harness.ModelCase(
    build=harness.tiny_encoder,
    inputs=lambda: harness.encoder_inputs(harness.pretraining_batch()),
    float32_outputs=(constants.SEQUENCE_OUTPUT,))


def test_harness_checks(tmp_path):
  harness.run_model_checks(CASE, tmp_path)


def test_saved_model_export_reloads_with_equal_outputs(tmp_path):
  harness.run_saved_model_export(CASE.build(), CASE.inputs(), tmp_path)


harness.register_backend_case("encoder", CASE)


# JAX and torch in processes of their own for every registered model: about 40 s.
@pytest.mark.slow
def test_tensorflow_jax_and_torch_give_the_same_outputs_loss_and_step():
  harness.run_backend_parity("encoder")


@pytest.mark.slow
def test_fit_on_torch_trains_every_variable():
  harness.run_torch_fit("encoder")


def test_encoder_config_gives_back_the_constructor_arguments():
  assert harness.tiny_encoder().encoder_config() == configs.EncoderConfig(
      **{**harness.TINY_ENCODER, "dropout_rate": 0.0, "attention_dropout_rate": 0.0})


def test_same_seed_gives_same_initial_weights_and_other_seed_differs():
  a = harness.tiny_encoder(seed=7).get_weights()
  b = harness.tiny_encoder(seed=7).get_weights()
  c = harness.tiny_encoder(seed=8).get_weights()
  for x, y in zip(a, b):
    np.testing.assert_array_equal(x, y)
  assert any(not np.array_equal(x, z) for x, z in zip(a, c))


def test_initial_weights_follow_truncated_normal_0_02():
  encoder = harness.tiny_encoder()
  table = encoder.get_embedding_table().numpy()
  assert abs(table.std() - 0.02 * 0.88) < 0.003  # Truncated at 2 sigma: std 0.88 sigma.
  assert np.abs(table).max() <= 0.04 + 1e-6


@pytest.mark.parametrize("policy", harness.MIXED_POLICIES)
def test_mixed_precision_runs_attention_in_the_compute_dtype(policy):
  # Only its softmax is float32 (checked by the harness); the matmuls are not.
  keras.mixed_precision.set_global_policy(policy)
  encoder = harness.tiny_encoder()
  assert encoder.transformer_layers[0].attention.compute_dtype == policy.split("_")[1]


def test_sequence_longer_than_max_positions_is_rejected():
  encoder = harness.tiny_encoder()
  ids = tf.ones([1, 65], tf.int32)
  with pytest.raises(Exception):
    encoder({constants.INPUT_WORD_IDS: ids, constants.INPUT_MASK: ids,
             constants.INPUT_TYPE_IDS: ids * 0})


def test_call_at_positions_equals_the_full_outputs_at_cls_and_those_positions():
  encoder = harness.tiny_encoder()
  batch = harness.pretraining_batch()
  inputs = harness.encoder_inputs(batch)
  positions = batch[constants.MASKED_LM_POSITIONS]
  full = encoder(inputs)
  sparse = encoder.call_at_positions(inputs, positions)
  np.testing.assert_allclose(sparse[constants.SEQUENCE_OUTPUT],
                             tf.gather(full[constants.SEQUENCE_OUTPUT], positions,
                                       batch_dims=1), atol=1e-5)
  np.testing.assert_allclose(sparse[constants.POOLED_OUTPUT],
                             full[constants.POOLED_OUTPUT], atol=1e-5)
  cls_only = encoder.call_at_positions(inputs)
  assert set(cls_only) == {constants.POOLED_OUTPUT}
  np.testing.assert_allclose(cls_only[constants.POOLED_OUTPUT],
                             full[constants.POOLED_OUTPUT], atol=1e-5)


def test_each_packed_example_gets_the_outputs_it_gets_alone():
  encoder = harness.tiny_encoder()
  rng = np.random.default_rng(0)
  lengths = [5, 9, 3, 7, 12, 4]
  examples = []
  for n in lengths:
    ids = rng.integers(5, encoder.vocab_size, n).astype(np.int32)
    examples.append((ids, (np.arange(n) >= n // 2).astype(np.int32)))
  def padded(values):
    return np.stack([np.pad(v, (0, 16 - len(v))) for v in values])

  rows = {constants.INPUT_WORD_IDS: padded([e[0] for e in examples]),
          constants.INPUT_MASK: padded([np.ones_like(e[0]) for e in examples]),
          constants.INPUT_TYPE_IDS: padded([e[1] for e in examples])}
  packed = example_packing.pack_batch(rows, seq_length=16)
  rows, width = packed[constants.INPUT_WORD_IDS].shape
  every_position = tf.tile(tf.range(width)[None], [rows, 1])
  out = encoder.call_packed(packed, every_position)
  assert out[constants.SEQUENCE_OUTPUT].shape == (rows, width, 32)
  at_cls = encoder.call_packed(packed, packed[constants.PACKED_CLS_POSITIONS])
  per_row = packed[constants.PACKED_CLS_POSITIONS].shape[1]
  for i, (ids, types) in enumerate(examples):
    alone = encoder({constants.INPUT_WORD_IDS: ids[None], constants.INPUT_TYPE_IDS: types[None],
                     constants.INPUT_MASK: np.ones_like(ids)[None]})
    row, k = divmod(int(packed[constants.PACKED_EXAMPLE_SLOTS][i]), per_row)
    start = int(packed[constants.PACKED_CLS_POSITIONS][row, k])
    np.testing.assert_allclose(out[constants.SEQUENCE_OUTPUT][row, start:start + len(ids)],
                               alone[constants.SEQUENCE_OUTPUT][0], atol=1e-5)
    np.testing.assert_allclose(at_cls[constants.POOLED_OUTPUT][row, k],
                               alone[constants.POOLED_OUTPUT][0], atol=1e-5)
