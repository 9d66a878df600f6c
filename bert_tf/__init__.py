"""bert_tf: BERT for TensorFlow 2 and Keras 3, from raw text to served models."""

__version__ = "0.1.0"
