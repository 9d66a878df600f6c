"""SQuAD v1.1 / v2.0 span question answering.

Inputs come from a SQuAD JSON file (format "squad_json": windows are created in
Python by its record kind, bert_tf.data.pipelines.loaders.squad, then fed from
tensors), from TFRecords written by
bert_tf.data.records.squad_records.write_squad_tfrecords (format "tfrecord"), or are synthetic
(format "dummy"). Evaluation post-processes the gathered logits into answers for the
evaluation questions, which the record kind gives with their windows and answers (the
task reads no file), and scores them with the official SQuAD definitions of exact match
and F1; for v2.0 it also reports the null threshold that maximizes F1 on the evaluation
data, as the paper tunes it on dev.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Dict, Optional

import numpy as np

from bert_tf import configs
from bert_tf.data.pipelines.loaders import squad as squad_loaders
from bert_tf.data.task_files import squad as squad_data
from bert_tf.data.task_files import squad_postprocess
from bert_tf import losses
from bert_tf.metrics import squad as squad_metrics
from bert_tf.metrics import sums
from bert_tf.models.bert_span_labeler import END_LOGITS, START_LOGITS, BertSpanLabeler
from bert_tf.tasks import base

if TYPE_CHECKING:
  import tensorflow as tf  # pylint: disable=g-bad-import-order


@dataclasses.dataclass
class SquadTaskConfig(configs.TaskConfig):
  """SQuAD settings. The window length is data_config.seq_length (384 in the paper);
  the vocab and its case come from the experiment's tokenizer section."""

  name: str = "squad"
  version_2_with_negative: bool = False
  doc_stride: int = 128
  max_query_length: int = 64
  n_best_size: int = 20
  max_answer_length: int = 30
  # v2.0: "" is predicted where null score - best span score exceeds this.
  null_score_diff_threshold: float = 0.0
  # v2.0: write predictions.json with the threshold that maximizes F1 on the eval data.
  tune_null_threshold: bool = True
  # The SQuAD JSON whose questions evaluation answers; defaults to eval_data.input_path
  # when that is a JSON file (needed with eval_data.format "tfrecord").
  predict_file: str = ""

  def validate(self):
    for name in ("doc_stride", "max_query_length", "n_best_size", "max_answer_length"):
      if getattr(self, name) <= 0:
        raise configs.ConfigError(f"{name} must be positive, got {getattr(self, name)}")


SQUAD_JSON = squad_loaders.SQUAD_JSON


@base.register_task("squad", SquadTaskConfig)
class SquadTask(base.Task):
  """Span question answering: start/end logits over the tokens, mean cross-entropy."""

  record_kind = squad_loaders.SQUAD
  export_kind = "squad"

  # ----- model -----
  def build_model(self) -> BertSpanLabeler:
    encoder = self.build_encoder()
    return BertSpanLabeler(encoder, name="bert_span_labeler")

  # ----- evaluation questions -----
  def _questions_file(self) -> str:
    data = self.experiment.eval_data
    if self.config.predict_file:
      return self.config.predict_file
    return data.input_path if data.format == SQUAD_JSON else ""

  def eval_set(self, path: str = "", data_config: Optional[configs.DataConfig] = None
               ) -> squad_loaders.Questions:
    """The evaluation questions of `path` (default: predict_file, else the eval_data JSON),
    their windows and answers, from the record kind, created once per path."""
    path = path or self._questions_file()
    if not path:
      raise configs.ConfigError("SQuAD evaluation needs task.predict_file (a SQuAD JSON) "
                                "or eval_data.format squad_json")
    data_config = (data_config or self.experiment.eval_data).replace(input_path=path,
                                                                     is_training=False)
    return squad_loaders.KIND.questions(self.input_needs, data_config)

  # ----- loss and metrics -----
  def compute_loss(self, features, outputs, global_batch_size: int) -> Dict[str, tf.Tensor]:
    """(start cross-entropy + end cross-entropy) / 2, averaged over the global batch."""
    start_loss, end_loss = losses.span_losses(
        features[squad_data.START_POSITIONS], features[squad_data.END_POSITIONS],
        outputs[START_LOGITS], outputs[END_LOGITS])
    return {
        "loss": losses.global_mean(start_loss + end_loss, global_batch_size) / 2.0,
        "start_loss": losses.global_mean(start_loss, global_batch_size),
        "end_loss": losses.global_mean(end_loss, global_batch_size),
    }

  def train_metrics(self, features, outputs):
    """start_accuracy and end_accuracy: the argmax position equals the label."""
    out = {}
    for name, logits, labels in (("start_accuracy", outputs[START_LOGITS],
                                  features[squad_data.START_POSITIONS]),
                                 ("end_accuracy", outputs[END_LOGITS],
                                  features[squad_data.END_POSITIONS])):
      out[name] = sums.accuracy_sums(logits, labels)
    return out

  def eval_outputs(self, features, outputs) -> Dict[str, tf.Tensor]:
    return {
        squad_data.UNIQUE_IDS: features[squad_data.UNIQUE_IDS],
        START_LOGITS: outputs[START_LOGITS],
        END_LOGITS: outputs[END_LOGITS],
        squad_data.START_POSITIONS: features[squad_data.START_POSITIONS],
        squad_data.END_POSITIONS: features[squad_data.END_POSITIONS],
    }

  def postprocess(self, values: Dict[str, np.ndarray]) -> squad_postprocess.SquadPredictions:
    """Answers for the evaluation questions from the gathered eval_outputs."""
    questions = self.eval_set()
    results = {int(uid): (s, e) for uid, s, e in zip(
        values[squad_data.UNIQUE_IDS], values[START_LOGITS], values[END_LOGITS])}
    return squad_postprocess.postprocess(
        questions.examples, questions.windows, results, n_best_size=self.config.n_best_size,
        max_answer_length=self.config.max_answer_length,
        lower_case=self.experiment.tokenizer.lower_case,
        version_2_with_negative=self.config.version_2_with_negative,
        null_score_diff_threshold=self.config.null_score_diff_threshold)

  def reduce_eval(self, values: Dict[str, np.ndarray]) -> Dict[str, float]:
    """start/end position accuracy, and with evaluation questions exact_match and f1
    (v2.0: also HasAns/NoAns splits and best_f1 / best_f1_thresh)."""
    metrics = {}
    for name, logits, labels in (("start_accuracy", START_LOGITS, squad_data.START_POSITIONS),
                                 ("end_accuracy", END_LOGITS, squad_data.END_POSITIONS)):
      metrics[name] = float(np.mean(np.argmax(values[logits], axis=-1) == values[labels]))
    if not self._questions_file():
      return metrics
    result = self.postprocess(values)
    dataset = self.eval_set().articles
    if self.config.version_2_with_negative:
      metrics.update(squad_metrics.evaluate_v2(dataset, result.predictions, result.null_odds,
                                               self.config.null_score_diff_threshold))
    else:
      metrics.update(squad_metrics.evaluate_v1(dataset, result.predictions))
    return metrics

  # ----- predictions -----
  def write_predictions(self, values: Dict[str, np.ndarray], output_dir: str) -> Optional[str]:
    """Writes predictions.json, nbest_predictions.json and (v2.0) null_odds.json.

    For v2.0 with tune_null_threshold, predictions.json uses the null threshold that
    maximizes F1 on the evaluation questions.
    """
    if not self._questions_file():
      return None
    result = self.postprocess(values)
    predictions = None
    if self.config.version_2_with_negative and self.config.tune_null_threshold:
      scores = squad_metrics.evaluate_v2(self.eval_set().articles, result.predictions,
                                         result.null_odds)
      predictions = result.with_threshold(scores["best_f1_thresh"])
      logging.info("Null threshold tuned on the evaluation questions: %.4f (F1 %.2f)",
                   scores["best_f1_thresh"], scores["best_f1"])
    paths = squad_postprocess.write_prediction_files(result, output_dir, predictions)
    return paths["predictions"]

  # ----- export -----
  def serving_options(self, data_config):
    c = self.config
    return {"max_query_length": c.max_query_length, "max_answer_length": c.max_answer_length,
            "version_2_with_negative": c.version_2_with_negative,
            "null_score_diff_threshold": c.null_score_diff_threshold,
            "doc_stride": c.doc_stride, "n_best_size": c.n_best_size}
