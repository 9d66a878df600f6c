"""bf16 exports (exporter.to_bfloat16, --quantize=bfloat16): bf16 weights and products,
LayerNorm and softmax in float32, outputs close to float32's, the same signatures."""


import keras
import numpy as np
import pytest
import tensorflow as tf

import export_helpers as helpers
from bert_tf import constants
from bert_tf.export import exporter
from bert_tf.utils import errors

TASKS = helpers.TASK_SECTIONS
# bf16 keeps 8 significant bits: each rounding of an operand or a product's output errs
# by at most 2^-9 (0.2%) of it, and the products accumulate in float32. Two blocks and a
# head round about ten times in sequence, so the outputs of the tiny model stay within
# 10 * 2^-9 (2%) of their largest magnitude; they land near 0.5% in practice.
RELATIVE_TOLERANCE = 10 * 2.0 ** -9
# Ops whose float inputs must be float32 in a bf16 export: the softmax, LayerNorm's
# mean, variance and inverse square root, and (for speed: TensorFlow's CPU kernel has no
# vectorized bf16 form) the GELU's Erfc.
FLOAT32_OPS = ("Softmax", "Mean", "SquaredDifference", "Rsqrt", "Erfc")


def _flat_outputs(outputs):
  return [np.asarray(x) for x in tf.nest.flatten(outputs)]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
  return helpers.write_vocab(tmp_path_factory.mktemp("vocab"))


@pytest.mark.parametrize("task", sorted(TASKS))
def test_bfloat16_model_has_bf16_weights_float32_layer_norms_and_close_float32_outputs(
    vocab, task):
  config = helpers.experiment(vocab, TASKS[task])
  model = helpers.build_model(config)
  inputs = helpers.random_model_inputs(model)
  expected = _flat_outputs(model(inputs, training=False))
  converted = exporter.to_bfloat16(config, model)
  layers = list(converted._flatten_layers())  # pylint: disable=protected-access
  norms = [layer for layer in layers if isinstance(layer, keras.layers.LayerNormalization)]
  dense = [layer for layer in layers if isinstance(layer, keras.layers.Dense)]
  # One LayerNorm after the embeddings and two per block; six products per block.
  assert len(norms) >= 1 + 2 * 2 and len(dense) >= 6 * 2
  assert all(layer.compute_dtype == "float32" for layer in norms)
  assert all(layer.compute_dtype == "bfloat16" for layer in dense)
  norm_weights = {id(w) for layer in norms for w in layer.weights}
  for weight in converted.weights:
    want = "float32" if id(weight) in norm_weights else "bfloat16"
    assert weight.dtype == want, weight.path
  # The source model keeps its float32 weights.
  assert all(weight.dtype == "float32" for weight in model.weights)
  actual = _flat_outputs(converted(inputs, training=False))
  assert len(actual) == len(expected)
  for want, got in zip(expected, actual):
    assert got.dtype == want.dtype
    if want.dtype.kind != "f":
      continue
    scale = np.max(np.abs(want))
    np.testing.assert_allclose(got, want, atol=RELATIVE_TOLERANCE * scale, rtol=0)
    assert not np.array_equal(got, want)  # Computed in bf16, not float32.


def test_an_unknown_quantize_mode_is_one_error_naming_the_modes(vocab):
  config = helpers.experiment(vocab, TASKS["mnli"])
  with pytest.raises(errors.InputError, match="int8, int8_dynamic, int8_onednn, bfloat16"):
    exporter.serving_model(config, helpers.build_model(config), "float16")


def _float_ops(graph_def):
  """{op type: the dtypes of its `T` attribute} over the float-typed nodes of a GraphDef
  and of its function library."""
  nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
  found = {}
  for node in nodes:
    if "T" not in node.attr or node.attr["T"].WhichOneof("value") != "type":
      continue
    dtype = tf.as_dtype(node.attr["T"].type)
    if dtype.is_floating:
      found.setdefault(node.op, set()).add(dtype.name)
  return found


def _token_ids_function(config, model, vocab):
  """The serve_token_ids computation of the model's ServingModule, traced (not saved)."""
  module = exporter.build_serving_module(config, model, vocab)
  spec = {name: tf.TensorSpec(module.token_ids_shape, tf.int32, name=name)
          for name in constants.ENCODER_INPUTS}
  return tf.function(module.predict_token_ids, autograph=False).get_concrete_function(spec)


def test_bfloat16_serving_graph_multiplies_in_bf16_and_normalizes_in_float32(vocab):
  config = helpers.experiment(vocab, TASKS["mnli"])
  model = helpers.build_model(config)
  functions = {"float32": _token_ids_function(config, model, vocab),
               "bfloat16": _token_ids_function(config, exporter.to_bfloat16(config, model),
                                               vocab)}
  # The same outputs, in the same dtypes.
  assert ({k: v.dtype for k, v in functions["bfloat16"].structured_outputs.items()}
          == {k: v.dtype for k, v in functions["float32"].structured_outputs.items()})
  ops = _float_ops(functions["bfloat16"].graph.as_graph_def())
  assert "bfloat16" in ops["BatchMatMulV2"] | ops.get("MatMul", set())
  for op in FLOAT32_OPS:
    assert ops[op] == {"float32"}, (op, ops[op])
  float_ops = _float_ops(functions["float32"].graph.as_graph_def())
  assert "bfloat16" not in set().union(*float_ops.values())


def test_the_export_tool_offers_every_quantize_mode_of_the_exporter():
  from tools import export_saved_model  # pylint: disable=g-import-not-at-top
  assert tuple(export_saved_model.FLAGS["quantize"].parser.enum_values) == exporter.QUANTIZE_MODES
