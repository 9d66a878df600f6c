"""Keras layers of the BERT encoder and its heads."""

from bert_tf.layers.classification_head import ClassificationHead
from bert_tf.layers.embeddings import BertEmbeddings
from bert_tf.layers.gather import gather_positions
from bert_tf.layers.masked_lm_head import MaskedLMHead
from bert_tf.layers.self_attention import (SelfAttention, attention_mask_bias,
                                           packed_attention_bias)
from bert_tf.layers.transformer_block import TransformerBlock
