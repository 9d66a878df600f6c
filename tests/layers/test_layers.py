"""The encoder's layers: definitions, config round trips, precision."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import harness
from bert_tf import layers
from bert_tf.kernels.tensorflow_cpu import hooks as cpu_hooks
from bert_tf.layers.flatten_choices import FlattenChoices
from bert_tf.layers.span_head import SpanHead


def test_embeddings_sum_word_position_type_then_layer_norm():
  layer = layers.BertEmbeddings(vocab_size=10, hidden_size=8, max_position_embeddings=6,
                                dropout_rate=0.0)
  ids = tf.constant([[1, 2, 3]])
  types = tf.constant([[0, 1, 1]])
  out = layer(ids, types).numpy()
  summed = (tf.gather(layer.word_embeddings, ids) + tf.gather(layer.token_type_embeddings, types)
            + layer.position_embeddings[:3][None]).numpy()
  mean = summed.mean(-1, keepdims=True)
  var = summed.var(-1, keepdims=True)
  np.testing.assert_allclose(out, (summed - mean) / np.sqrt(var + 1e-12), atol=1e-5)


@pytest.mark.parametrize("rows", [2, 16, 17])
def test_lookup_rows_equals_a_gather_in_value_and_gradient(rows):
  # At most ONE_HOT_MAX_ROWS rows: a one-hot product, whose gradient is a matmul, not a
  # scatter-add; above: the gather itself.
  tf.random.set_seed(0)
  table = tf.random.normal([rows, 8])
  ids = tf.random.uniform([3, 5], 0, rows, tf.int32)
  upstream = tf.random.normal([3, 5, 8])

  def value_and_gradient(lookup):
    with tf.GradientTape() as tape:
      tape.watch(table)
      rows_out = lookup(table, ids)
    gradient = tape.gradient(rows_out, table, output_gradients=upstream)
    return rows_out.numpy(), tf.convert_to_tensor(gradient).numpy()

  looked_up, gradient = value_and_gradient(layers.embeddings.lookup_rows)
  gathered, expected_gradient = value_and_gradient(lambda t, i: tf.gather(t, i))
  assert (rows <= layers.embeddings.ONE_HOT_MAX_ROWS) == (rows < 17)
  np.testing.assert_allclose(looked_up, gathered, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-6, atol=1e-6)


def test_token_type_rows_keep_their_variable_and_take_the_compute_dtype():
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  layer = layers.BertEmbeddings(vocab_size=10, hidden_size=8, max_position_embeddings=6,
                                dropout_rate=0.0)
  out = layer(tf.constant([[1, 2, 3]]), tf.constant([[0, 1, 1]]))
  assert out.dtype == tf.bfloat16
  assert layer.token_type_embeddings.path == "bert_embeddings/token_type_embeddings"
  assert layer.token_type_embeddings.dtype == "float32"


def test_self_attention_matches_reference_definition_and_ignores_masked_keys():
  keras.utils.set_random_seed(0)
  layer = layers.SelfAttention(num_heads=2, hidden_size=8, attention_dropout_rate=0.0)
  x = tf.random.normal([1, 4, 8])
  mask = tf.constant([[1, 1, 1, 0]])
  out = layer(x, layers.attention_mask_bias(mask)).numpy()

  def proj(dense, v):
    return v @ dense.kernel.numpy() + dense.bias.numpy()

  q, k, v = (proj(d, x.numpy()[0]).reshape(4, 2, 4).transpose(1, 0, 2)
             for d in (layer.query, layer.key, layer.value))
  scores = q @ k.transpose(0, 2, 1) / 2.0
  scores[:, :, 3] = -np.inf
  probs = np.exp(scores - scores.max(-1, keepdims=True))
  probs /= probs.sum(-1, keepdims=True)
  context = (probs @ v).transpose(1, 0, 2).reshape(4, 8)
  np.testing.assert_allclose(out[0], proj(layer.output_dense, context), atol=1e-5)


def test_transformer_block_is_post_layer_norm_with_exact_gelu():
  keras.utils.set_random_seed(0)
  block = layers.TransformerBlock(hidden_size=8, num_heads=2, intermediate_size=16,
                                  dropout_rate=0.0, attention_dropout_rate=0.0)
  x = tf.random.normal([2, 3, 8])
  bias = layers.attention_mask_bias(tf.ones([2, 3], tf.int32))
  out = block(x, bias)
  attended = block.attention(x, bias)
  out1 = block.attention_layer_norm(x + attended)
  pre = out1 @ block.intermediate.kernel + block.intermediate.bias
  gelu = 0.5 * pre * (1.0 + tf.math.erf(pre / np.sqrt(2.0)))
  ffn = gelu @ block.output_dense.kernel + block.output_dense.bias
  np.testing.assert_allclose(out, block.output_layer_norm(out1 + ffn), atol=1e-5)


# (layer factory, call arguments); MaskedLMHead goes through BertPretrainer's checks.
LAYER_CASES = {
    "embeddings": (lambda: layers.BertEmbeddings(vocab_size=10, hidden_size=8,
                                                 max_position_embeddings=6),
                   lambda: (tf.constant([[1, 2]]), tf.constant([[0, 1]]))),
    "self_attention": (lambda: layers.SelfAttention(num_heads=2, hidden_size=8),
                       lambda: (tf.random.normal([1, 3, 8]), tf.zeros([1, 1, 1, 3]))),
    "transformer_block": (lambda: layers.TransformerBlock(hidden_size=8, num_heads=2,
                                                          intermediate_size=16),
                          lambda: (tf.random.normal([1, 3, 8]), tf.zeros([1, 1, 1, 3]))),
    "classification_head": (lambda: layers.ClassificationHead(num_classes=3),
                            lambda: (tf.random.normal([2, 8]),)),
    "span_head": (lambda: SpanHead(), lambda: (tf.random.normal([2, 3, 8]),)),
    "flatten_choices": (lambda: FlattenChoices(), lambda: (tf.ones([2, 3, 4], tf.int32),)),
}


@pytest.mark.parametrize("name", sorted(LAYER_CASES))
def test_harness_layer_checks(name):
  make, call_args = LAYER_CASES[name]
  keras.utils.set_random_seed(0)
  harness.run_layer_checks(make, call_args())


def test_masked_lm_head_refuses_to_restore_without_its_model():
  with pytest.raises(TypeError, match="BertPretrainer"):
    layers.MaskedLMHead.from_config({"name": "x"})


def test_gather_positions_picks_vectors_per_example():
  seq = tf.reshape(tf.range(2 * 4 * 3, dtype=tf.float32), [2, 4, 3])
  out = layers.gather_positions(seq, tf.constant([[3, 0], [1, 1]]))
  np.testing.assert_array_equal(out[0], seq[0].numpy()[[3, 0]])
  np.testing.assert_array_equal(out[1], seq[1].numpy()[[1, 1]])


def test_transformer_block_at_query_positions_equals_those_rows_of_the_full_output():
  keras.utils.set_random_seed(0)
  block = layers.TransformerBlock(hidden_size=8, num_heads=2, intermediate_size=16,
                                  dropout_rate=0.0, attention_dropout_rate=0.0)
  x = tf.random.normal([2, 5, 8])
  bias = layers.attention_mask_bias(tf.constant([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]]))
  positions = tf.constant([[0, 3, 1], [0, 2, 2]])
  full = block(x, bias)
  sparse = block(x, bias, query_positions=positions)
  assert sparse.shape == (2, 3, 8)
  np.testing.assert_allclose(sparse, tf.gather(full, positions, batch_dims=1), atol=1e-5)


def _fused_nodes(graph_def):
  """Names of XLA-compiled functions and custom-gradient (IdentityN) nodes in a graph."""
  functions = list(graph_def.library.function)
  found = [f.signature.name for f in functions if "_XlaMustCompile" in f.attr]
  nodes = list(graph_def.node) + [n for f in functions for n in f.node_def]
  return found + [n.name for n in nodes if n.op == "IdentityN" or "_XlaMustCompile" in n.attr]


def test_fused_paths_stay_out_of_a_saved_model_with_a_dynamic_batch(tmp_path):
  from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=g-import-not-at-top
  keras.utils.set_random_seed(0)
  block = layers.TransformerBlock(hidden_size=8, num_heads=2, intermediate_size=32,
                                  kernels=cpu_hooks.KERNELS)
  x = tf.random.normal([2, 4, 8])
  bias = layers.attention_mask_bias(tf.ones([2, 4], tf.int32))

  @tf.function
  def train_step(x):
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(block(x, bias, training=True))
    return tape.gradient(loss, block.trainable_variables)

  # A static-shape training step takes the fused paths...
  assert _fused_nodes(train_step.get_concrete_function(x).graph.as_graph_def())
  module = tf.Module()
  module.block = block
  module.serve = tf.function(
      lambda x, mask: block(x, layers.attention_mask_bias(mask)),
      input_signature=[tf.TensorSpec([None, None, 8]), tf.TensorSpec([None, None], tf.int32)])
  tf.saved_model.save(module, str(tmp_path))
  saved = saved_model_pb2.SavedModel()
  saved.ParseFromString((tmp_path / "saved_model.pb").read_bytes())
  # ...which a serving signature (dynamic batch and length) must not carry.
  assert [_fused_nodes(g.graph_def) for g in saved.meta_graphs] == [[]]


def test_embeddings_with_position_ids_take_each_tokens_position():
  layer = layers.BertEmbeddings(vocab_size=10, hidden_size=8, max_position_embeddings=6,
                                dropout_rate=0.0)
  ids = tf.constant([[1, 2, 3, 4, 5]])
  types = tf.constant([[0, 1, 1, 0, 0]])
  default = layer(ids, types).numpy()
  np.testing.assert_allclose(layer(ids, types, position_ids=tf.constant([[0, 1, 2, 3, 4]])),
                             default, atol=1e-6)
  # Positions restarting at the fourth token: those tokens embed as at the start.
  restarted = layer(ids, types, position_ids=tf.constant([[0, 1, 2, 0, 1]])).numpy()
  np.testing.assert_allclose(restarted[:, 3:], layer(ids[:, 3:], types[:, 3:]), atol=1e-6)


def test_packed_attention_bias_lets_a_query_see_only_its_own_examples_keys():
  example_ids = tf.constant([[1, 1, 2, 2, 2, 0]])
  bias = layers.packed_attention_bias(example_ids).numpy()
  assert bias.shape == (1, 1, 6, 6)
  visible = bias[0, 0] == 0
  expected = np.zeros((6, 6), bool)
  expected[:2, :2] = True
  expected[2:5, 2:5] = True
  np.testing.assert_array_equal(visible, expected)
  np.testing.assert_array_equal(bias[0, 0][~expected], layers.self_attention.MASK_BIAS)
  queries = layers.packed_attention_bias(example_ids, tf.constant([[2, 1]])).numpy()
  np.testing.assert_array_equal(queries[0, 0], bias[0, 0][[2, 0]])
