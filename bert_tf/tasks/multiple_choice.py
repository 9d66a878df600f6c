"""Multiple choice (SWAG): one sequence per choice, softmax over the choices' scores."""

from __future__ import annotations

import dataclasses
import os
from typing import List

import numpy as np

from bert_tf import configs
from bert_tf import constants
from bert_tf.data.pipelines import loaders
from bert_tf.utils import files
from bert_tf.data.task_files import swag
from bert_tf import losses
from bert_tf.metrics import classification
from bert_tf.metrics import sums
from bert_tf.models.bert_classifier import LOGITS
from bert_tf.models.bert_multiple_choice import BertMultipleChoice
from bert_tf.tasks import base


@dataclasses.dataclass
class MultipleChoiceConfig(configs.TaskConfig):
  """Picks one of num_choices continuations of a context."""

  name: str = "multiple_choice"
  num_choices: int = swag.NUM_SWAG_CHOICES

  def validate(self):
    if self.num_choices < 2:
      raise configs.ConfigError(f"num_choices must be at least 2, got {self.num_choices}")


PREDICTIONS = "predictions"


@base.register_task("multiple_choice", MultipleChoiceConfig)
class MultipleChoiceTask(base.Task):
  """Cross-entropy over the choices' scores; accuracy."""

  record_kind = loaders.multiple_choice.MULTIPLE_CHOICE
  export_kind = "multiple_choice"

  def build_model(self):
    encoder = self.build_encoder()
    return BertMultipleChoice(encoder, self.config.num_choices,
                              dropout_rate=self.experiment.model.head_dropout_rate,
                              name="bert_multiple_choice")

  # ----- loss and metrics -----
  def _per_example_loss(self, features, outputs):
    return losses.classification_loss(features[constants.LABEL_IDS], outputs[LOGITS])

  def compute_loss(self, features, outputs, global_batch_size):
    per_example = self._per_example_loss(features, outputs)
    return {"loss": losses.global_mean(per_example, global_batch_size)}

  def train_metrics(self, features, outputs):
    return {"accuracy": sums.accuracy_sums(outputs[LOGITS], features[constants.LABEL_IDS])}

  def eval_outputs(self, features, outputs):
    return {
        PREDICTIONS: sums.predicted_ids(outputs[LOGITS]),
        constants.LABEL_IDS: features[constants.LABEL_IDS],
        constants.EXAMPLE_INDEX: features[constants.EXAMPLE_INDEX],
        "loss": self._per_example_loss(features, outputs),
    }

  def reduce_eval(self, values):
    return {
        "accuracy": classification.accuracy(np.asarray(values[constants.LABEL_IDS]),
                                            np.asarray(values[PREDICTIONS])),
        "loss": float(np.mean(values["loss"])),
    }

  def prediction_lines(self, values) -> List[str]:
    """`index<TAB>choice` rows ordered by index, after a header."""
    indices = np.asarray(values[constants.EXAMPLE_INDEX])
    return ["index\tprediction"] + [
        f"{int(indices[i])}\t{int(values[PREDICTIONS][i])}"
        for i in np.argsort(indices, kind="stable")]

  def write_predictions(self, values, output_dir):
    return files.write_lines(os.path.join(output_dir, "multiple_choice_predictions.tsv"),
                                    self.prediction_lines(values))

  # ----- export -----
  def serving_options(self, data_config):
    return {"num_choices": self.config.num_choices}
