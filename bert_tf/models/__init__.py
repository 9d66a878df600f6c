"""Keras models: the encoder, and the encoder with heads."""

from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_pretrainer import BertPretrainer
