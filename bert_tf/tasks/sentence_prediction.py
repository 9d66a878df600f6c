"""Sentence and sentence-pair classification and regression (GLUE and the like)."""

from __future__ import annotations

import dataclasses
import os
from typing import List, Tuple

import numpy as np
from keras import ops

from bert_tf import configs
from bert_tf import constants
from bert_tf.data.pipelines import loaders
from bert_tf.utils import files
from bert_tf.data.task_files import glue
from bert_tf import losses
from bert_tf.metrics import classification
from bert_tf.metrics import sums
from bert_tf.models.bert_classifier import LOGITS, BertClassifier
from bert_tf.tasks import base


@dataclasses.dataclass
class SentencePredictionConfig(configs.TaskConfig):
  """A classification or regression task over one or two sentences.

  With `glue_task` set (cola, sst2, mrpc, qqp, stsb, mnli, qnli, rte, wnli), files
  are read in that task's GLUE layout and the labels, metric and score range default
  to GLUE's. Otherwise TSV/CSV files with a header are read by column name.
  """

  name: str = "sentence_prediction"
  glue_task: str = ""
  # 1 is regression; 0 takes the count from label_names or glue_task.
  num_classes: int = 0
  # Class names in id order; empty: glue_task's, or "0".."num_classes-1".
  label_names: List[str] = dataclasses.field(default_factory=list)
  # accuracy, accuracy_f1, matthews_corrcoef or pearson_spearman; empty: glue_task's.
  metric: str = ""
  # Header names of the columns of a generic TSV/CSV file.
  text_a_column: str = "text"
  text_b_column: str = ""
  label_column: str = "label"
  index_column: str = ""
  # [low, high] of regression scores; rows outside are errors.
  score_range: List[float] = dataclasses.field(default_factory=list)

  def validate(self):
    if self.glue_task and self.glue_task not in glue.GLUE_TASKS:
      raise configs.ConfigError(f"glue_task must be one of {', '.join(glue.GLUE_TASKS)}, got "
                                f"'{self.glue_task}'")
    if self.metric and self.metric not in classification.GLUE_METRICS:
      raise configs.ConfigError(f"metric must be one of "
                                f"{', '.join(classification.GLUE_METRICS)}, got '{self.metric}'")
    if self.num_classes < 0:
      raise configs.ConfigError(f"num_classes must be >= 0, got {self.num_classes}")
    if self.score_range and (len(self.score_range) != 2 or
                             self.score_range[0] >= self.score_range[1]):
      raise configs.ConfigError(f"score_range must be [low, high], got {self.score_range}")
    if self.num_classes > 1 and self.label_names and len(self.label_names) != self.num_classes:
      raise configs.ConfigError(f"label_names has {len(self.label_names)} names but "
                                f"num_classes is {self.num_classes}")

  def resolved(self) -> Tuple[int, Tuple[str, ...], str, Tuple[float, ...]]:
    """(num_classes, label_names, metric, score_range) after defaults."""
    spec = glue.GLUE_TASKS.get(self.glue_task)
    score_range = tuple(self.score_range) or (spec.score_range if spec else ())
    label_names = tuple(self.label_names) or (spec.label_names if spec else ())
    num_classes = self.num_classes or (1 if score_range else len(label_names)) or 2
    if num_classes == 1:
      label_names = ()
    elif not label_names:
      label_names = tuple(str(i) for i in range(num_classes))
    if num_classes > 1 and len(label_names) != num_classes:
      raise configs.ConfigError(f"task: {len(label_names)} label names for {num_classes} "
                                "classes")
    metric = self.metric or (spec.metric if spec else
                             ("pearson_spearman" if num_classes == 1 else "accuracy"))
    if (metric == "pearson_spearman") != (num_classes == 1):
      raise configs.ConfigError(f"task.metric '{metric}' does not fit num_classes "
                                f"{num_classes}")
    return num_classes, label_names, metric, score_range


PREDICTIONS = "predictions"


def _predictions(outputs, regression: bool):
  """float32 scores [B] (regression) or int32 class ids [B] of the logits."""
  if regression:
    return ops.cast(outputs[LOGITS], "float32")[:, 0]
  return sums.predicted_ids(outputs[LOGITS])


@base.register_task("sentence_prediction", SentencePredictionConfig)
class SentencePredictionTask(base.Task):
  """[CLS] vector -> dropout -> dense; cross-entropy, or squared error for regression."""

  record_kind = loaders.sentence.SENTENCE
  packs_examples = True
  export_kind = "classifier"

  def __init__(self, experiment):
    super().__init__(experiment)
    (self.num_classes, self.label_names, self.metric,
     self.score_range) = self.config.resolved()
    self.regression = self.num_classes == 1

  # ----- model -----
  def build_model(self):
    encoder = self.build_encoder()
    return BertClassifier(encoder, self.num_classes,
                          dropout_rate=self.experiment.model.head_dropout_rate,
                          name="bert_classifier")

  def model_inputs(self, features):
    """The encoder inputs, and with a packed batch its packing features too."""
    inputs = super().model_inputs(features)
    inputs.update({name: features[name] for name in constants.PACKED_INPUTS
                   if name in features})
    return inputs

  # ----- loss and metrics -----
  def _per_example_loss(self, features, outputs):
    return losses.classification_loss(features[constants.LABEL_IDS], outputs[LOGITS],
                                      self.regression)

  def compute_loss(self, features, outputs, global_batch_size):
    return {"loss": losses.global_mean(self._per_example_loss(features, outputs),
                                       global_batch_size)}

  def train_metrics(self, features, outputs):
    labels = features[constants.LABEL_IDS]
    if self.regression:
      error = losses.squared_error(_predictions(outputs, self.regression), labels)
      return {"mean_squared_error": sums.ratio(ops.sum(error), ops.size(error))}
    return {"accuracy": sums.accuracy_sums(outputs[LOGITS], labels)}

  def eval_outputs(self, features, outputs):
    return {
        PREDICTIONS: _predictions(outputs, self.regression),
        constants.LABEL_IDS: features[constants.LABEL_IDS],
        constants.EXAMPLE_INDEX: features[constants.EXAMPLE_INDEX],
        "loss": self._per_example_loss(features, outputs),
    }

  def reduce_eval(self, values):
    result = classification.glue_metrics(self.metric, np.asarray(values[constants.LABEL_IDS]),
                                         np.asarray(values[PREDICTIONS]))
    if "loss" in values:
      result["loss"] = float(np.mean(values["loss"]))
    return result

  # ----- predictions -----
  def prediction_lines(self, values) -> List[str]:
    """GLUE submission rows: a header, then `index<TAB>prediction` by index."""
    order = np.argsort(np.asarray(values[constants.EXAMPLE_INDEX]), kind="stable")
    lines = ["index\tprediction"]
    for i in order:
      prediction = values[PREDICTIONS][i]
      if self.regression:
        text = f"{float(prediction):.3f}"
      else:
        text = self.label_names[int(prediction)]
      lines.append(f"{int(values[constants.EXAMPLE_INDEX][i])}\t{text}")
    return lines

  def write_predictions(self, values, output_dir):
    name = f"{self.config.glue_task or 'sentence_prediction'}_predictions.tsv"
    return files.write_lines(os.path.join(output_dir, name),
                                    self.prediction_lines(values))

  # ----- export -----
  def serving_options(self, data_config):
    """The label names, and whether the task reads sentence pairs (its GLUE task's, or
    a text_b column)."""
    if self.config.glue_task:
      pair = bool(glue.GLUE_TASKS[self.config.glue_task].text_b)
    else:
      pair = bool(self.config.text_b_column)
    return {"label_names": self.label_names, "pair": pair}
