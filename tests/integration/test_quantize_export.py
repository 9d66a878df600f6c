"""int8 exports (every mode): every Dense kernel int8, outputs close to float32, serving
unchanged, and each mode's product in the graph."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import export_helpers as helpers
import kernels_helpers
from bert_tf.export import exporter
from bert_tf.export import serving_ops_check
from bert_tf.layers import embeddings
from bert_tf.kernels.tensorflow_cpu import hooks as cpu_hooks

TASKS = helpers.TASK_SECTIONS
# int8 weights (per output channel), and in int8_dynamic int8 inputs (per row), keep each
# matmul within about 1% of float32 (int8_onednn: uint8 inputs per row);
# over two blocks and a head the outputs of the tiny model stay within this fraction of
# their largest magnitude. Rounding the weights alone errs less.
RELATIVE_TOLERANCE = {exporter.INT8: 0.02, exporter.INT8_DYNAMIC: 0.05,
                      exporter.INT8_ONEDNN: 0.05}


def _float_outputs(outputs):
  return [np.asarray(x) for x in tf.nest.flatten(outputs)
          if np.asarray(x).dtype.kind == "f"]


def _traced(model, inputs):
  """The model called inside a tf.function on static shapes (where the fused kernels apply)."""
  return tf.function(lambda x: model(x, training=False))(
      {k: tf.constant(v) for k, v in inputs.items()})


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
  return helpers.write_vocab(tmp_path_factory.mktemp("vocab"))


@pytest.mark.parametrize("mode", exporter.INT8_MODES)
@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_dense_is_int8_and_outputs_stay_close_with_fusion_on_and_off(vocab, task,
                                                                            mode):
  config = helpers.experiment(vocab, TASKS[task])
  model = helpers.build_model(config)
  inputs = helpers.random_model_inputs(model)
  expected = _float_outputs(model(inputs, training=False))
  quantized = exporter.quantize(model, mode)
  dense = [layer for layer in quantized._flatten_layers()  # pylint: disable=protected-access
           if isinstance(layer, keras.layers.Dense)]
  # 6 per block (query, key, value, attention output, intermediate, output) + pooler.
  assert len(dense) >= 6 * 2 + 1
  assert all(layer.quantization_mode == "int8" for layer in dense)
  assert all(layer._kernel.dtype == "int8" for layer in dense)  # pylint: disable=protected-access
  [embedding] = [layer for layer in quantized._flatten_layers()  # pylint: disable=protected-access
                 if isinstance(layer, embeddings.BertEmbeddings)]
  assert embedding.word_embeddings.dtype == "int8"
  assert embedding.word_embeddings_scale.shape == (embedding.vocab_size,)
  # Only int8_dynamic quantizes the inputs.
  assert all(bool(layer.inputs_quantizer) == (mode == exporter.INT8_DYNAMIC)
             for layer in dense)
  for on in (True, False):
    with kernels_helpers.kernels_of(quantized, cpu_hooks.KERNELS if on else None):
      actual = _float_outputs(_traced(quantized, inputs))
    for want, got in zip(expected, actual):
      scale = np.max(np.abs(want))
      np.testing.assert_allclose(got, want, atol=RELATIVE_TOLERANCE[mode] * scale, rtol=0)
      # Quantized, hence not the float32 result itself.
      assert not np.array_equal(got, want)


@pytest.mark.parametrize("mode", exporter.INT8_MODES)
def test_fused_and_plain_paths_agree_on_a_quantized_model(vocab, mode):
  config = helpers.experiment(vocab, TASKS["mnli"])
  model = exporter.quantize(helpers.build_model(config), mode)
  inputs = helpers.random_model_inputs(model, seed=1)
  with kernels_helpers.kernels_of(model, cpu_hooks.KERNELS):
    fused = _traced(model, inputs)
  with kernels_helpers.kernels_of(model, None):
    plain = _traced(model, inputs)
  for a, b in zip(_float_outputs(fused), _float_outputs(plain)):
    np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)


def test_unknown_mode_is_refused_not_quantized_as_another(vocab):
  config = helpers.experiment(vocab, TASKS["mnli"])
  with pytest.raises(KeyError, match="int3"):
    exporter.quantize(helpers.build_model(config), "int3")


def _variable_bytes(export_dir):
  return sum(os.path.getsize(path) for path in tf.io.gfile.glob(
      os.path.join(export_dir, "variables", "variables.data-*")))


@pytest.mark.parametrize("mode", exporter.INT8_MODES)
def test_int8_export_serves_raw_text_with_allowlisted_ops(vocab, tmp_path, mode):
  config = helpers.experiment(vocab, TASKS["mnli"])
  model = helpers.build_model(config)
  checkpoint = helpers.save_checkpoint(model, tmp_path / "ckpt")
  float_path = exporter.export_from_checkpoint(checkpoint, config, str(tmp_path / "f32"))
  int8_path = exporter.export_from_checkpoint(checkpoint, config, str(tmp_path / "int8"),
                                              quantize_mode=mode)
  assert not serving_ops_check.unexpected_ops(int8_path)
  texts = tf.constant(["the cat sat on the mat", "hello world", ""])
  pair = tf.constant(["a dog ran", "", "what is good"])
  served = {}
  for name, path in (("f32", float_path), ("int8", int8_path)):
    signature = tf.saved_model.load(path).signatures["serving_default"]
    assert sorted(signature.structured_input_signature[1]) == ["text", "text_b"]
    served[name] = {k: v.numpy() for k, v in signature(text=texts, text_b=pair).items()}
  assert sorted(served["f32"]) == sorted(served["int8"])
  probabilities = [k for k in served["f32"] if served["f32"][k].dtype.kind == "f"]
  assert probabilities
  for key in probabilities:
    np.testing.assert_allclose(served["int8"][key], served["f32"][key], atol=0.05)
  # The int8 x int8 product is BatchMatMulV3 in int8_dynamic, oneDNN's op in
  # int8_onednn; int8 multiplies in float32.
  ops = serving_ops_check.saved_model_op_types(int8_path)
  assert ("BatchMatMulV3" in ops) == (mode == exporter.INT8_DYNAMIC)
  assert ("QuantizedMatMulWithBiasAndDequantize" in ops) == (mode == exporter.INT8_ONEDNN)
  # Dense kernels and the word-embedding table are int8 in every mode. What stays float
  # (position embeddings, 512 rows, most of it here; scales, biases, LayerNorm) keeps
  # this tiny model at half its float32 bytes; BERT-base goes to about a quarter.
  # int8_onednn adds a float32 vector per Dense layer, as large as its bias.
  fraction = 0.55 if mode == exporter.INT8_ONEDNN else 0.52
  assert _variable_bytes(int8_path) < fraction * _variable_bytes(float_path)


def test_int8_word_embeddings_round_each_row_to_its_own_scale():
  layer = embeddings.BertEmbeddings(vocab_size=6, hidden_size=4, max_position_embeddings=8)
  layer.build()
  table = np.array([[1.0, -2.0, 0.5, 0.0], [0.0] * 4, [3.0, 1.5, -0.75, 0.3],
                    [-1e-3, 2e-3, 0.0, 1e-3], [10.0, -10.0, 5.0, 2.5], [1.0] * 4], np.float32)
  layer.word_embeddings.assign(table)
  layer.quantize("int8")
  scale = np.abs(table).max(axis=1) / 127
  scale[1] = 1.0  # An all-zero row keeps scale 1.
  np.testing.assert_allclose(layer.word_embeddings_scale.numpy(), scale, rtol=1e-6)
  values = layer.word_embeddings.numpy()
  assert values.dtype == np.int8 and np.abs(values).max() == 127
  dequantized = layer.word_embedding_values("float32").numpy()
  assert np.all(np.abs(dequantized - table) <= scale[:, None] / 2 + 1e-7)
  ids = np.array([[0, 2, 5], [4, 1, 3]], np.int32)
  words = layer._lookup_words(ids)  # pylint: disable=protected-access
  np.testing.assert_allclose(words, dequantized[ids], rtol=1e-6)
  with pytest.raises(ValueError, match="already int8"):
    layer.quantize("int8")
