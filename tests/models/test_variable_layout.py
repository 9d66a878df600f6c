"""Variable paths and checkpoint keys of the models, pinned: checkpoints written by
earlier versions of bert_tf must keep loading, so a refactoring of the layers may change
how they compute but never what they hold or what a tf.train.Checkpoint calls it."""

import os

import tensorflow as tf

from bert_tf.models import BertEncoder
from bert_tf.models import BertPretrainer
from bert_tf.models.bert_classifier import BertClassifier

_TINY = dict(vocab_size=60, hidden_size=16, num_layers=2, num_attention_heads=2,
             intermediate_size=32, max_position_embeddings=24)

_ENCODER_WEIGHTS = [
    ('embeddings/word_embeddings', (60, 16)),
    ('embeddings/position_embeddings', (24, 16)),
    ('embeddings/token_type_embeddings', (2, 16)),
    ('embeddings/layer_norm/gamma', (16,)),
    ('embeddings/layer_norm/beta', (16,)),
    ('transformer_layer_0/attention/query/kernel', (16, 16)),
    ('transformer_layer_0/attention/query/bias', (16,)),
    ('transformer_layer_0/attention/key/kernel', (16, 16)),
    ('transformer_layer_0/attention/key/bias', (16,)),
    ('transformer_layer_0/attention/value/kernel', (16, 16)),
    ('transformer_layer_0/attention/value/bias', (16,)),
    ('transformer_layer_0/attention/output/kernel', (16, 16)),
    ('transformer_layer_0/attention/output/bias', (16,)),
    ('transformer_layer_0/attention_layer_norm/gamma', (16,)),
    ('transformer_layer_0/attention_layer_norm/beta', (16,)),
    ('transformer_layer_0/intermediate/kernel', (16, 32)),
    ('transformer_layer_0/intermediate/bias', (32,)),
    ('transformer_layer_0/output/kernel', (32, 16)),
    ('transformer_layer_0/output/bias', (16,)),
    ('transformer_layer_0/output_layer_norm/gamma', (16,)),
    ('transformer_layer_0/output_layer_norm/beta', (16,)),
    ('transformer_layer_1/attention/query/kernel', (16, 16)),
    ('transformer_layer_1/attention/query/bias', (16,)),
    ('transformer_layer_1/attention/key/kernel', (16, 16)),
    ('transformer_layer_1/attention/key/bias', (16,)),
    ('transformer_layer_1/attention/value/kernel', (16, 16)),
    ('transformer_layer_1/attention/value/bias', (16,)),
    ('transformer_layer_1/attention/output/kernel', (16, 16)),
    ('transformer_layer_1/attention/output/bias', (16,)),
    ('transformer_layer_1/attention_layer_norm/gamma', (16,)),
    ('transformer_layer_1/attention_layer_norm/beta', (16,)),
    ('transformer_layer_1/intermediate/kernel', (16, 32)),
    ('transformer_layer_1/intermediate/bias', (32,)),
    ('transformer_layer_1/output/kernel', (32, 16)),
    ('transformer_layer_1/output/bias', (16,)),
    ('transformer_layer_1/output_layer_norm/gamma', (16,)),
    ('transformer_layer_1/output_layer_norm/beta', (16,)),
    ('pooler/kernel', (16, 16)),
    ('pooler/bias', (16,)),
]

# The encoder's checkpoint keys, which every task model's checkpoint holds.
_ENCODER_CHECKPOINT = [
    ('encoder/_operations/8/attention/key/_kernel/.ATTRIBUTES/VARIABLE_VALUE', (16, 16)),
    ('encoder/_operations/8/attention/key/bias/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/_operations/8/attention/output_dense/_kernel/.ATTRIBUTES/VARIABLE_VALUE', (16, 16)),
    ('encoder/_operations/8/attention/output_dense/bias/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/_operations/8/attention/query/_kernel/.ATTRIBUTES/VARIABLE_VALUE', (16, 16)),
    ('encoder/_operations/8/attention/query/bias/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/_operations/8/attention/value/_kernel/.ATTRIBUTES/VARIABLE_VALUE', (16, 16)),
    ('encoder/_operations/8/attention/value/bias/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/_operations/8/attention_layer_norm/beta/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/_operations/8/attention_layer_norm/gamma/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/_operations/8/intermediate/_kernel/.ATTRIBUTES/VARIABLE_VALUE', (16, 32)),
    ('encoder/_operations/8/intermediate/bias/.ATTRIBUTES/VARIABLE_VALUE', (32,)),
    ('encoder/_operations/8/output_dense/_kernel/.ATTRIBUTES/VARIABLE_VALUE', (32, 16)),
    ('encoder/_operations/8/output_dense/bias/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/_operations/8/output_layer_norm/beta/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/_operations/8/output_layer_norm/gamma/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/_operations/9/attention/key/_kernel/.ATTRIBUTES/VARIABLE_VALUE', (16, 16)),
    ('encoder/_operations/9/attention/key/bias/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/_operations/9/attention/output_dense/_kernel/.ATTRIBUTES/VARIABLE_VALUE', (16, 16)),
    ('encoder/_operations/9/attention/output_dense/bias/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/_operations/9/attention/query/_kernel/.ATTRIBUTES/VARIABLE_VALUE', (16, 16)),
    ('encoder/_operations/9/attention/query/bias/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/_operations/9/attention/value/_kernel/.ATTRIBUTES/VARIABLE_VALUE', (16, 16)),
    ('encoder/_operations/9/attention/value/bias/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/_operations/9/attention_layer_norm/beta/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/_operations/9/attention_layer_norm/gamma/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/_operations/9/intermediate/_kernel/.ATTRIBUTES/VARIABLE_VALUE', (16, 32)),
    ('encoder/_operations/9/intermediate/bias/.ATTRIBUTES/VARIABLE_VALUE', (32,)),
    ('encoder/_operations/9/output_dense/_kernel/.ATTRIBUTES/VARIABLE_VALUE', (32, 16)),
    ('encoder/_operations/9/output_dense/bias/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/_operations/9/output_layer_norm/beta/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/_operations/9/output_layer_norm/gamma/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/embeddings/layer_norm/beta/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/embeddings/layer_norm/gamma/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('encoder/embeddings/position_embeddings/.ATTRIBUTES/VARIABLE_VALUE', (24, 16)),
    ('encoder/embeddings/token_type_embeddings/.ATTRIBUTES/VARIABLE_VALUE', (2, 16)),
    ('encoder/embeddings/word_embeddings/.ATTRIBUTES/VARIABLE_VALUE', (60, 16)),
    ('encoder/pooler/_kernel/.ATTRIBUTES/VARIABLE_VALUE', (16, 16)),
    ('encoder/pooler/bias/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
]

_PRETRAINER_WEIGHTS = _ENCODER_WEIGHTS + [
    ('masked_lm/output_bias', (60,)),
    ('masked_lm/transform/kernel', (16, 16)),
    ('masked_lm/transform/bias', (16,)),
    ('masked_lm/transform_layer_norm/gamma', (16,)),
    ('masked_lm/transform_layer_norm/beta', (16,)),
    ('next_sentence/dense/kernel', (16, 2)),
    ('next_sentence/dense/bias', (2,)),
]

_PRETRAINER_CHECKPOINT = [
    ('_CHECKPOINTABLE_OBJECT_GRAPH', ()),
] + _ENCODER_CHECKPOINT + [
    ('masked_lm/output_bias/.ATTRIBUTES/VARIABLE_VALUE', (60,)),
    ('masked_lm/transform/_kernel/.ATTRIBUTES/VARIABLE_VALUE', (16, 16)),
    ('masked_lm/transform/bias/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('masked_lm/transform_layer_norm/beta/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('masked_lm/transform_layer_norm/gamma/.ATTRIBUTES/VARIABLE_VALUE', (16,)),
    ('next_sentence/dense/_kernel/.ATTRIBUTES/VARIABLE_VALUE', (16, 2)),
    ('next_sentence/dense/bias/.ATTRIBUTES/VARIABLE_VALUE', (2,)),
    ('save_counter/.ATTRIBUTES/VARIABLE_VALUE', ()),
]

_CLASSIFIER_WEIGHTS = _ENCODER_WEIGHTS + [
    ('classifier/dense/kernel', (16, 3)),
    ('classifier/dense/bias', (3,)),
]

_CLASSIFIER_CHECKPOINT = [
    ('_CHECKPOINTABLE_OBJECT_GRAPH', ()),
    ('classifier/dense/_kernel/.ATTRIBUTES/VARIABLE_VALUE', (16, 3)),
    ('classifier/dense/bias/.ATTRIBUTES/VARIABLE_VALUE', (3,)),
] + _ENCODER_CHECKPOINT + [
    ('save_counter/.ATTRIBUTES/VARIABLE_VALUE', ()),
]


def _layout(model, directory):
  """(path, shape) of every weight, and (key, shape) of the checkpoint it writes."""
  prefix = tf.train.Checkpoint(**model.checkpoint_items).save(os.path.join(directory, "ckpt"))
  weights = [(w.path, tuple(w.shape)) for w in model.weights]
  return weights, [(name, tuple(shape)) for name, shape in tf.train.list_variables(prefix)]


def test_pretrainer_variables_and_checkpoint_keys_are_unchanged(tmp_path):
  weights, keys = _layout(BertPretrainer(BertEncoder(**_TINY)), str(tmp_path))
  assert weights == _PRETRAINER_WEIGHTS
  assert keys == _PRETRAINER_CHECKPOINT


def test_classifier_variables_and_checkpoint_keys_are_unchanged(tmp_path):
  weights, keys = _layout(BertClassifier(BertEncoder(**_TINY), num_classes=3), str(tmp_path))
  assert weights == _CLASSIFIER_WEIGHTS
  assert keys == _CLASSIFIER_CHECKPOINT
