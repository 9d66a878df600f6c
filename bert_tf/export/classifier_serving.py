"""Serving a sentence (pair) classifier or regressor."""

import tensorflow as tf

from bert_tf.export import label_table
from bert_tf.export import serving_module
from bert_tf.models.bert_classifier import LOGITS

PROBABILITIES = "probabilities"
LABEL_IDS = "label_ids"
LABEL_NAMES = "label_names"
SCORE = "score"
TRUNCATED_TOKENS = "truncated_tokens"


@serving_module.register_serving("classifier")
class ClassifierServing(serving_module.ServingModule):
  """A BertClassifier served with its label names.

  Outputs, classification: logits float32 [B, C] (what transformers'
  BertForSequenceClassification gives), probabilities float32 [B, C] (their softmax),
  label_ids int32 [B], label_names string [B] (the predicted labels' names).
  Regression (one output): score float32 [B], the one logit. The raw-text signatures also give truncated_tokens int32
  [B]: the WordPieces of the row cut to fit seq_length (0 when all fit).
  """

  answer_outputs = (frozenset({LABEL_NAMES, LABEL_IDS, PROBABILITIES}), frozenset({SCORE}))

  @staticmethod
  def answer(outputs, row):
    if LABEL_NAMES not in outputs:
      return {"score": float(outputs[SCORE][row])}
    return {"label": serving_module.text_of(outputs[LABEL_NAMES][row]),
            "label_id": int(outputs[LABEL_IDS][row]),
            "probabilities": [float(p) for p in outputs[PROBABILITIES][row]]}

  @staticmethod
  def describe_answer(answer):
    if "label" not in answer:
      return [f"  score: {answer['score']:.4f}"]
    probabilities = ", ".join(f"{p:.3f}" for p in answer["probabilities"])
    return [f"  label: {answer['label']} (probabilities by label id: {probabilities})"]

  def __init__(self, classifier, text_encoder, label_names=(), pair=False,
               name="classifier_serving"):
    inputs = (serving_module.TEXT, serving_module.TEXT_B) if pair else (serving_module.TEXT,)
    super().__init__(classifier, text_encoder, inputs, name=name)
    self.regression = classifier.num_classes == 1
    if not self.regression:
      label_names = tuple(label_names) or tuple(str(i) for i in range(classifier.num_classes))
      if len(label_names) != classifier.num_classes:
        raise ValueError(f"{len(label_names)} label names for {classifier.num_classes} classes")
      self.labels = label_table.LabelTable(label_names)

  def predict_text(self, texts):
    inputs, truncated = self.text_encoder.encode_with_truncation(
        *[texts[name] for name in self.text_inputs])
    result = self.predict_token_ids(inputs)
    result[TRUNCATED_TOKENS] = truncated
    return result

  def predict_token_ids(self, inputs):
    logits = tf.cast(self.call_model(inputs)[LOGITS], tf.float32)
    if self.regression:
      return {SCORE: logits[:, 0]}
    ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {
        LOGITS: logits,
        PROBABILITIES: tf.nn.softmax(logits, axis=-1),
        LABEL_IDS: ids,
        LABEL_NAMES: self.labels.lookup(ids),
    }
