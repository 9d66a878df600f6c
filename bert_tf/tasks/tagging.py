"""Token tagging (CoNLL-2003 NER and any CoNLL-format file)."""

from __future__ import annotations

import dataclasses
import os
from typing import List, Optional, Tuple

import numpy as np
from keras import ops

from bert_tf import configs
from bert_tf.data.task_files import conll
from bert_tf import constants
from bert_tf.data.pipelines import loaders
from bert_tf.utils import files
from bert_tf import losses
from bert_tf.metrics import sums
from bert_tf.metrics import tagging as tagging_metrics
from bert_tf.models.bert_classifier import LOGITS
from bert_tf.models.bert_token_classifier import BertTokenClassifier
from bert_tf.tasks import base


@dataclasses.dataclass
class TaggingConfig(configs.TaskConfig):
  """Tags every word from the encoder output at its first WordPiece."""

  name: str = "tagging"
  # Tags in id order; the default holds CoNLL-2003's in both IOB1 and IOB2 spelling.
  label_names: List[str] = dataclasses.field(
      default_factory=lambda: list(conll.CONLL2003_LABELS))
  # A sentence longer than seq_length - 2 pieces is read in windows of that many pieces
  # starting this many pieces apart; each word is tagged in the window where it has
  # the most context (as SQuAD's doc_stride windows), in training, evaluation and the
  # export alike.
  window_stride: int = 64

  def validate(self):
    if len(self.label_names) < 2 or len(set(self.label_names)) != len(self.label_names):
      raise configs.ConfigError("label_names must hold at least two distinct tags")
    if self.window_stride < 1:
      raise configs.ConfigError(f"window_stride must be positive, got {self.window_stride}")


PREDICTIONS = "predictions"


@base.register_task("tagging", TaggingConfig)
class TaggingTask(base.Task):
  """Per-token softmax; the loss and metrics see only each word's first piece, in the
  window where the word has the most context."""

  record_kind = loaders.tagging.TAGGING
  export_kind = "tagging"

  def __init__(self, experiment):
    super().__init__(experiment)
    self.label_names = tuple(self.config.label_names)

  def build_model(self):
    encoder = self.build_encoder()
    return BertTokenClassifier(encoder, len(self.label_names),
                               dropout_rate=self.experiment.model.head_dropout_rate,
                               name="bert_token_classifier")

  # ----- loss and metrics -----
  def _scored(self, features):
    labels = ops.cast(features[constants.LABEL_IDS], "int32")
    weights = ops.cast(ops.not_equal(labels, constants.IGNORE_LABEL), "float32")
    return ops.maximum(labels, 0), weights

  def compute_loss(self, features, outputs, global_batch_size):
    """Cross-entropy of first pieces, averaged per example then over the global batch.

    Each example's mean over its words keeps the loss decomposable over replicas
    (tf.nn.compute_average_loss), whatever the number of words per replica.
    """
    labels, weights = self._scored(features)
    per_example = losses.token_classification_loss(labels, outputs[LOGITS], weights)
    return {"loss": losses.global_mean(per_example, global_batch_size)}

  def train_metrics(self, features, outputs):
    labels, weights = self._scored(features)
    return {"token_accuracy": sums.accuracy_sums(outputs[LOGITS], labels, weights)}

  def eval_outputs(self, features, outputs):
    """Predicted and gold tag ids, padded to eval_data.seq_length so batches concatenate,
    and the example and window of each row."""
    length = self.experiment.eval_data.seq_length
    predictions = sums.predicted_ids(outputs[LOGITS])
    labels = ops.cast(features[constants.LABEL_IDS], "int32")
    pad = [[0, 0], [0, length - ops.shape(labels)[1]]]
    return {
        PREDICTIONS: ops.pad(predictions, pad),
        constants.LABEL_IDS: ops.pad(labels, pad, constant_values=constants.IGNORE_LABEL),
        constants.EXAMPLE_INDEX: features[constants.EXAMPLE_INDEX],
        constants.WINDOW_INDEX: features[constants.WINDOW_INDEX],
    }

  def word_tags(self, values) -> Tuple[List[int], List[List[str]], List[List[str]]]:
    """Per example (by index): its index, gold tags and predicted tags of its words.

    A word is scored in one window only, and the words scored in a window come after
    those of the windows before it (`bert_tf.text.windows`), so the example's words
    are its windows' scored positions in window order, whatever order the rows came in.
    """
    labels = np.asarray(values[constants.LABEL_IDS])
    predictions = np.asarray(values[PREDICTIONS])
    indices = np.asarray(values[constants.EXAMPLE_INDEX])
    order = np.lexsort((np.asarray(values[constants.WINDOW_INDEX]), indices))
    out_index, gold, predicted = [], [], []
    for row in order:
      scored = labels[row] != constants.IGNORE_LABEL
      if not out_index or out_index[-1] != int(indices[row]):
        out_index.append(int(indices[row]))
        gold.append([])
        predicted.append([])
      gold[-1].extend(self.label_names[i] for i in labels[row][scored])
      predicted[-1].extend(self.label_names[i] for i in predictions[row][scored])
    return out_index, gold, predicted

  def reduce_eval(self, values):
    """conlleval precision, recall and F1 over every word of the evaluated sentences."""
    _, gold, predicted = self.word_tags(values)
    return tagging_metrics.conll_precision_recall_f1(gold, predicted)

  # ----- predictions -----
  def prediction_lines(self, values, examples: Optional[List[conll.TaggingExample]] = None
                       ) -> List[str]:
    """CoNLL lines `word gold predicted`, a blank line after each sentence.

    With the examples (the raw eval file), every word has its prediction (the words of
    an evaluation cut short by validation_steps inside a sentence are written with O);
    without them, `index<TAB>tags` lines are written.
    """
    indices, _, predicted = self.word_tags(values)
    if examples is None:
      return [f"{i}\t{' '.join(tags)}" for i, tags in zip(indices, predicted)]
    by_index = {e.index: e for e in examples}
    lines = []
    for i, tags in zip(indices, predicted):
      e = by_index[i]
      tags = tags + ["O"] * (len(e.words) - len(tags))
      gold = e.tags or ["O"] * len(e.words)
      lines.extend(f"{w} {g} {p}" for w, g, p in zip(e.words, gold, tags))
      lines.append("")
    return lines

  def write_predictions(self, values, output_dir):
    eval_data = self.experiment.eval_data
    examples = (self.data_loader(eval_data).examples()
                if eval_data.format not in loaders.PREPARED_FORMATS else None)
    return files.write_lines(os.path.join(output_dir, "tagging_predictions.txt"),
                                    self.prediction_lines(values, examples))

  # ----- export -----
  def serving_options(self, data_config):
    return {"label_names": self.label_names, "window_stride": self.config.window_stride}
