"""BertPretrainer: tied masked-LM weights, the loss, training, and the harness checks."""

import numpy as np
import pytest
import tensorflow as tf

import harness
from bert_tf import constants
from bert_tf import losses
from bert_tf.models import BertPretrainer

PRETRAINER_INPUTS = (*constants.ENCODER_INPUTS, constants.MASKED_LM_POSITIONS)


def _inputs(batch):
  return {k: batch[k] for k in PRETRAINER_INPUTS}


def _case(batch_size=4):
  batch = harness.pretraining_batch(batch_size=batch_size)
  return harness.ModelCase(
      build=lambda: BertPretrainer(harness.tiny_encoder()),
      inputs=lambda: _inputs(batch),
      float32_outputs=(constants.MLM_LOGITS, constants.NSP_LOGITS),
      loss=lambda outputs, _: losses.pretraining_loss(batch, outputs)["loss"],
      family="pretraining")


def test_harness_checks_and_the_reloaded_model_keeps_the_tie(tmp_path):
  restored = harness.run_model_checks(_case(), tmp_path)
  assert restored.masked_lm.embedding_table is restored.encoder.embeddings.word_embeddings


def test_saved_model_export_reloads_with_equal_outputs(tmp_path):
  case = _case()
  harness.run_saved_model_export(case.build(), case.inputs(), tmp_path)


harness.register_backend_case("pretrainer", _case())


# JAX and torch in processes of their own for every registered model: about 40 s.
@pytest.mark.slow
def test_tensorflow_jax_and_torch_give_the_same_outputs_loss_and_step():
  harness.run_backend_parity("pretrainer")


@pytest.mark.slow
def test_fit_on_torch_trains_every_variable():
  harness.run_torch_fit("pretrainer")


def test_masked_lm_output_weights_are_the_word_embedding_variable():
  encoder = harness.tiny_encoder()
  model = BertPretrainer(encoder)
  model(_inputs(harness.pretraining_batch()))
  assert model.masked_lm.embedding_table is encoder.embeddings.word_embeddings
  # The table is counted once, not twice.
  assert sum(1 for w in model.weights if "word_embeddings" in w.path) == 1


def test_mlm_logits_equal_gathered_hidden_times_embedding_transpose():
  model = BertPretrainer(harness.tiny_encoder())
  batch = harness.pretraining_batch()
  out = model(_inputs(batch))
  seq = model.encoder(harness.encoder_inputs(batch))[constants.SEQUENCE_OUTPUT]
  head = model.masked_lm
  gathered = tf.gather(seq, batch[constants.MASKED_LM_POSITIONS], batch_dims=1)
  hidden = head.transform_layer_norm(head.transform(gathered))
  expected = tf.matmul(hidden, head.embedding_table, transpose_b=True) + head.output_bias
  np.testing.assert_allclose(out[constants.MLM_LOGITS], expected, atol=1e-5)
  assert out[constants.MLM_LOGITS].shape == (4, 4, 100)
  assert out[constants.NSP_LOGITS].shape == (4, 2)


def test_pretraining_loss_equals_weighted_mean_cross_entropy_plus_nsp():
  model = BertPretrainer(harness.tiny_encoder())
  batch = harness.pretraining_batch()
  out = model(_inputs(batch))
  result = losses.pretraining_loss(batch, out)
  logits = out[constants.MLM_LOGITS].numpy()
  ids = batch[constants.MASKED_LM_IDS].numpy()
  w = batch[constants.MASKED_LM_WEIGHTS].numpy()
  logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  xent = -np.take_along_axis(logp, ids[..., None], -1)[..., 0]
  mlm = (xent * w).sum() / (w.sum() + 1e-5)
  nsp_logits = out[constants.NSP_LOGITS].numpy()
  nsp_logp = nsp_logits - np.log(np.exp(nsp_logits).sum(-1, keepdims=True))
  labels = batch[constants.NEXT_SENTENCE_LABELS].numpy()
  nsp = -nsp_logp[np.arange(len(labels)), labels].mean()
  np.testing.assert_allclose(result["masked_lm_loss"], mlm, rtol=1e-5)
  np.testing.assert_allclose(result["next_sentence_loss"], nsp, rtol=1e-5)
  np.testing.assert_allclose(result["loss"], mlm + nsp, rtol=1e-5)


@pytest.mark.slow  # a learning run
def test_a_few_steps_on_one_repeated_batch_drive_the_loss_down():
  case = _case(batch_size=8)
  history = harness.run_training_steps(case.build(), case, case.inputs(), steps=30,
                                       learning_rate=1e-2, compiled=True)
  assert history[-1] < 0.5 * history[0], history


def test_without_next_sentence_head_outputs_only_mlm_logits():
  model = BertPretrainer(harness.tiny_encoder(), use_next_sentence_label=False)
  out = model(_inputs(harness.pretraining_batch()))
  assert set(out) == {constants.MLM_LOGITS}
  assert set(model.checkpoint_items) == {"encoder", "masked_lm"}


def test_checkpoint_items_cover_every_weight():
  model = BertPretrainer(harness.tiny_encoder())
  model(_inputs(harness.pretraining_batch()))
  covered = {id(w) for item in model.checkpoint_items.values() for w in item.weights}
  assert covered == {id(w) for w in model.weights}


def test_sparse_last_layer_gives_the_plain_graphs_outputs_and_gradients():
  model = BertPretrainer(harness.tiny_encoder())
  batch = harness.pretraining_batch()

  def outputs_and_grads(model):
    with tf.GradientTape() as tape:
      out = model(_inputs(batch), training=True)
      loss = losses.pretraining_loss(batch, out)["loss"]
    return out, tape.gradient(loss, model.trainable_variables)

  assert model.sparse_last_layer
  sparse_out, sparse_grads = outputs_and_grads(model)
  plain = BertPretrainer.from_config({**model.get_config(), "sparse_last_layer": False})
  plain.set_weights(model.get_weights())
  assert not plain.sparse_last_layer
  assert BertPretrainer.from_config(plain.get_config()).get_config() == plain.get_config()
  plain_out, plain_grads = outputs_and_grads(plain)
  harness.assert_nested_allclose(sparse_out, plain_out, atol=1e-5)
  for variable, a, b in zip(model.trainable_variables, sparse_grads, plain_grads):
    np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(b),
                               atol=1e-5, err_msg=variable.path)
