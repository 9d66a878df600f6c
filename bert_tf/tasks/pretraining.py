"""Masked-LM plus next-sentence pretraining of BERT."""

from __future__ import annotations

import dataclasses
from typing import Dict, Tuple

import numpy as np
from keras import ops

from bert_tf import configs
from bert_tf import constants
from bert_tf import losses
from bert_tf.data.pipelines import loaders
from bert_tf.kernels import protocol
from bert_tf.metrics import sums
from bert_tf.models import BertPretrainer
from bert_tf.tasks import base


@dataclasses.dataclass
class PretrainingTaskConfig(configs.TaskConfig):
  """Masked-LM plus next-sentence pretraining."""

  name: str = "pretraining"
  # Turn off to pretrain with the masked-LM loss alone (RoBERTa style).
  use_next_sentence_label: bool = True


@base.register_task("pretraining", PretrainingTaskConfig)
class PretrainingTask(base.Task):
  """BERT pretraining: the masked-LM loss plus (optionally) the next-sentence loss.

  The masked-LM loss divides by the sum of masked_lm_weights over the *global* batch
  (all replicas, all micro-batches), so that every real prediction weighs the same
  whatever the strategy and however the batch is split.
  """

  record_kind = loaders.pretraining.PRETRAINING
  input_names = (*constants.ENCODER_INPUTS, constants.MASKED_LM_POSITIONS)
  export_kind = "fill_mask"
  progress_metrics = ("loss", "masked_lm_accuracy")

  def build_model(self) -> BertPretrainer:
    """A BertPretrainer in the runtime's dtype policy (variables stay float32)."""
    return BertPretrainer(self.build_encoder(), use_next_sentence_label=self.config.use_next_sentence_label,
                          name="bert_pretrainer")

  # ----- loss and metrics -----
  def loss_normalizers(self, features) -> Dict[str, object]:
    """Sums the trainer adds up over a replica's whole batch and over all replicas.

    Returns:
      {"mlm_weight_sum": float32 scalar}, the masked-LM denominator.
    """
    return {"mlm_weight_sum": ops.sum(
        ops.cast(features[constants.MASKED_LM_WEIGHTS], "float32"))}

  def compute_loss(self, features, outputs, global_batch_size: int,
                   mlm_weight_sum=None) -> Dict[str, object]:
    """Float32 losses of one replica's batch, averaged over the global batch.

    Args:
      features: a batch of pretraining features.
      outputs: BertPretrainer outputs.
      global_batch_size: examples in the global batch (the next-sentence denominator).
      mlm_weight_sum: sum of masked_lm_weights over the global batch (a trainer sums
        `loss_normalizers` over every replica and micro-batch); None: this batch's.

    Returns:
      {"loss", "masked_lm_loss", "next_sentence_loss" (with the NSP head)}.
    """
    if mlm_weight_sum is None:
      mlm_weight_sum = self.loss_normalizers(features)["mlm_weight_sum"]
    denominator = ops.stop_gradient(mlm_weight_sum) + 1e-5
    kernels = self.kernels or protocol.REFERENCE
    return kernels.loss(losses.pretraining_loss, features, outputs,
                        mlm_weight_sum=denominator, global_batch_size=global_batch_size)

  def train_metrics(self, features, outputs) -> Dict[str, Tuple[object, object]]:
    """Masked-LM and next-sentence accuracy as (correct, count) sums.

    Only the arg-maxes: the cross-entropy over the [B, P, V] logits that eval_outputs
    also computes is already in the loss, and a second one costs a pass over them.
    """
    metrics = {"masked_lm_accuracy": sums.accuracy_sums(
        outputs[constants.MLM_LOGITS], features[constants.MASKED_LM_IDS],
        features[constants.MASKED_LM_WEIGHTS])}
    if constants.NSP_LOGITS in outputs:
      metrics["next_sentence_accuracy"] = sums.accuracy_sums(
          outputs[constants.NSP_LOGITS],
          ops.reshape(features[constants.NEXT_SENTENCE_LABELS], (-1,)))
    return metrics

  def eval_outputs(self, features, outputs) -> Dict[str, object]:
    """Per-example sums, float32 [B]: masked_lm_correct, masked_lm_weight,
    masked_lm_loss_sum, and with the NSP head next_sentence_correct and
    next_sentence_loss."""
    weights = ops.cast(features[constants.MASKED_LM_WEIGHTS], "float32")
    labels = features[constants.MASKED_LM_IDS]
    logits = outputs[constants.MLM_LOGITS]
    xent = losses.sparse_cross_entropy(labels, logits)
    result = {
        "masked_lm_correct": ops.sum(
            sums.correct(sums.predicted_ids(logits), labels) * weights, axis=-1),
        "masked_lm_weight": ops.sum(weights, axis=-1),
        "masked_lm_loss_sum": ops.sum(xent * weights, axis=-1),
    }
    if constants.NSP_LOGITS in outputs:
      nsp_labels = ops.reshape(features[constants.NEXT_SENTENCE_LABELS], (-1,))
      nsp_logits = outputs[constants.NSP_LOGITS]
      result["next_sentence_correct"] = sums.correct(sums.predicted_ids(nsp_logits),
                                                     nsp_labels)
      result["next_sentence_loss"] = losses.next_sentence_loss(nsp_labels, nsp_logits)
    return result

  def reduce_eval(self, values: Dict[str, np.ndarray]) -> Dict[str, float]:
    """masked_lm_accuracy, masked_lm_loss, masked_lm_perplexity (exp of the loss),
    next_sentence_accuracy, next_sentence_loss, num_examples."""
    weight = float(np.sum(values["masked_lm_weight"]))
    mlm_loss = float(np.sum(values["masked_lm_loss_sum"])) / max(weight, 1e-12)
    metrics = {
        "masked_lm_accuracy": float(np.sum(values["masked_lm_correct"])) / max(weight, 1e-12),
        "masked_lm_loss": mlm_loss,
        "masked_lm_perplexity": float(np.exp(min(mlm_loss, 700.0))),
        "num_examples": float(len(values["masked_lm_weight"])),
    }
    if "next_sentence_correct" in values:
      metrics["next_sentence_accuracy"] = float(np.mean(values["next_sentence_correct"]))
      metrics["next_sentence_loss"] = float(np.mean(values["next_sentence_loss"]))
    return metrics

  # ----- export -----
  def serving_options(self, data_config: configs.DataConfig):
    """The fill-mask export predicts as many [MASK]s per text as training did."""
    return {"max_masks": max(data_config.max_predictions_per_seq, 1)}
