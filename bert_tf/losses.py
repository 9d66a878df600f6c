"""Pretraining losses, computed in float32."""

from typing import Dict, Optional

import tensorflow as tf

from bert_tf import constants


def masked_lm_loss(labels, logits, weights, weight_sum: Optional[tf.Tensor] = None):
  """Masked-LM cross-entropy averaged over the weighted (real) predictions.

  Args:
    labels: int [B, P] original token ids.
    logits: float [B, P, V].
    weights: float [B, P], 1 at real predictions, 0 at padding.
    weight_sum: the denominator; defaults to sum(weights) + 1e-5 of this batch. A
      trainer passes the sum over the global batch so that every replica divides by
      the same number.

  Returns:
    float32 scalar.
  """
  logits = tf.cast(logits, tf.float32)
  weights = tf.cast(weights, tf.float32)
  per_position = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(labels, tf.int32), logits=logits)
  if weight_sum is None:
    weight_sum = tf.reduce_sum(weights) + 1e-5
  return tf.reduce_sum(per_position * weights) / weight_sum


def next_sentence_loss(labels, logits):
  """Per-example next-sentence cross-entropy.

  Args:
    labels: int [B] or [B, 1], 0 when B follows A, 1 when B is random.
    logits: float [B, 2].

  Returns:
    float32 [B].
  """
  labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
  return tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=tf.cast(logits, tf.float32))


def pretraining_loss(features: Dict[str, tf.Tensor], outputs: Dict[str, tf.Tensor],
                     mlm_weight_sum=None, global_batch_size=None) -> Dict[str, tf.Tensor]:
  """The BERT pretraining loss: masked-LM mean plus next-sentence mean.

  Args:
    features: a batch with masked_lm_ids, masked_lm_weights, next_sentence_labels.
    outputs: BertPretrainer outputs.
    mlm_weight_sum: the masked-LM denominator (see masked_lm_loss).
    global_batch_size: the next-sentence denominator; defaults to this batch's size.

  Returns:
    dict of float32 scalars: loss, masked_lm_loss, next_sentence_loss (when present).
  """
  mlm = masked_lm_loss(features[constants.MASKED_LM_IDS], outputs[constants.MLM_LOGITS],
                       features[constants.MASKED_LM_WEIGHTS], mlm_weight_sum)
  result = {"masked_lm_loss": mlm, "loss": mlm}
  if constants.NSP_LOGITS in outputs:
    per_example = next_sentence_loss(features[constants.NEXT_SENTENCE_LABELS],
                                     outputs[constants.NSP_LOGITS])
    if global_batch_size is None:
      nsp = tf.reduce_mean(per_example)
    else:
      nsp = tf.reduce_sum(per_example) / tf.cast(global_batch_size, tf.float32)
    result["next_sentence_loss"] = nsp
    result["loss"] = mlm + nsp
  return result
