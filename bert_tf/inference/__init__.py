"""Inference from Python on raw text: `Predictor.from_run(model_dir)`,
`Predictor.from_export(export_dir)` or `load(path)`, then `predict(["text", ...])`,
which returns the model's logits, probabilities and labels (spans, entities, fill-mask
tokens) as `Predictions`. Importing it loads neither TensorFlow nor Keras."""

from bert_tf.inference.predictions import Predictions
from bert_tf.inference.predictor import Predictor, load

__all__ = ["Predictions", "Predictor", "load"]
