"""The losses of every task family, in float32, written with keras.ops.

They run on every Keras backend (TensorFlow, JAX, torch) and import no TensorFlow.
Per-example losses are [B] float32; the tasks average them over the *global* batch
(`global_mean`), so that summing the replicas' (or devices') losses gives the loss of
the whole batch.
"""

from typing import Dict

from keras import ops

from bert_tf import constants


def sparse_cross_entropy(labels, logits):
  """Softmax cross-entropy of integer labels.

  Args:
    labels: int [...] class ids in [0, C).
    logits: float [..., C].

  Returns:
    float32 [...].
  """
  return ops.sparse_categorical_crossentropy(ops.cast(labels, "int32"),
                                             ops.cast(logits, "float32"), from_logits=True)


def squared_error(predictions, targets):
  """(predictions - targets)^2 in float32, elementwise."""
  return ops.square(ops.cast(predictions, "float32") - ops.cast(targets, "float32"))


def global_mean(per_example, global_batch_size):
  """sum(per_example) / global_batch_size: float32 scalar."""
  return ops.sum(per_example) / ops.cast(global_batch_size, "float32")


# --------------------------------------------------------------------------------------
# Pretraining.

def masked_lm_loss(labels, logits, weights, weight_sum=None):
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
  weights = ops.cast(weights, "float32")
  per_position = sparse_cross_entropy(labels, logits)
  if weight_sum is None:
    weight_sum = ops.sum(weights) + 1e-5
  return ops.sum(per_position * weights) / weight_sum


def next_sentence_loss(labels, logits):
  """Per-example next-sentence cross-entropy.

  Args:
    labels: int [B] or [B, 1], 0 when B follows A, 1 when B is random.
    logits: float [B, 2].

  Returns:
    float32 [B].
  """
  return sparse_cross_entropy(ops.reshape(labels, (-1,)), logits)


def pretraining_loss(features, outputs, mlm_weight_sum=None,
                     global_batch_size=None) -> Dict[str, object]:
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
      nsp = ops.mean(per_example)
    else:
      nsp = global_mean(per_example, global_batch_size)
    result["next_sentence_loss"] = nsp
    result["loss"] = mlm + nsp
  return result


# --------------------------------------------------------------------------------------
# Fine-tuning.

def classification_loss(labels, logits, regression: bool = False):
  """Per-example loss of a classifier (cross-entropy) or a regressor (squared error).

  Args:
    labels: int [B] class ids, or float [B] scores for regression.
    logits: float [B, C] ([B, 1] scores for regression).

  Returns:
    float32 [B].
  """
  if regression:
    return squared_error(logits[:, 0], labels)
  return sparse_cross_entropy(labels, logits)


def span_losses(start_positions, end_positions, start_logits, end_logits):
  """Per-example cross-entropies of an answer span's start and end.

  Args:
    start_positions, end_positions: int [B], token indices.
    start_logits, end_logits: float [B, T].

  Returns:
    (start, end): float32 [B] each; the SQuAD loss is their mean.
  """
  return (sparse_cross_entropy(start_positions, start_logits),
          sparse_cross_entropy(end_positions, end_logits))


def token_classification_loss(labels, logits, weights):
  """Per-example mean cross-entropy over the weighted (labelled) tokens.

  Args:
    labels: int [B, T] tag ids (any valid id where weights is 0).
    logits: float [B, T, C].
    weights: float [B, T], 1 at labelled tokens.

  Returns:
    float32 [B]; 0 for an example without labelled tokens.
  """
  weights = ops.cast(weights, "float32")
  per_token = sparse_cross_entropy(labels, logits)
  return ops.sum(per_token * weights, axis=-1) / ops.maximum(ops.sum(weights, axis=-1), 1.0)


def distillation_loss(student_logits, teacher_logits, labels, temperature: float,
                      soft_loss_weight: float, regression: bool = False):
  """(1 - w) * hard + w * soft, per example (Hinton et al., 2015).

  hard: the task loss against the labels. soft: for classes, T^2 times the KL
  divergence from the teacher's to the student's softmax at temperature T; for
  regression, the squared difference of the two scores. No gradient reaches the
  teacher.

  Args:
    student_logits, teacher_logits: float [B, C] ([B, 1] scores for regression).
    labels: int [B] class ids, or float [B] scores for regression.
    temperature: T.
    soft_loss_weight: w, the soft term's weight.
    regression: whether the logits are scores.

  Returns:
    float32 [B].
  """
  student = ops.cast(student_logits, "float32")
  teacher = ops.stop_gradient(ops.cast(teacher_logits, "float32"))
  hard = classification_loss(labels, student, regression)
  if regression:
    soft = squared_error(student[:, 0], teacher[:, 0])
  else:
    teacher_log_probs = ops.log_softmax(teacher / temperature, axis=-1)
    student_log_probs = ops.log_softmax(student / temperature, axis=-1)
    soft = temperature ** 2 * ops.sum(
        ops.exp(teacher_log_probs) * (teacher_log_probs - student_log_probs), axis=-1)
  return (1.0 - soft_loss_weight) * hard + soft_loss_weight * soft

