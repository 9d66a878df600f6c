"""Checkpoints: the trainer's portable format, restoring a model's items, and conversion
between bert_tf, the original Google TF1 release, Hugging Face and KerasHub.

`convert_checkpoint(input_path, output_dir, input_format="auto", output_format="bert_tf")`
does a whole conversion, task heads included; `read_checkpoint` gives a bert_tf model from
any format and `save_checkpoint` writes one in any format. The names of every weight in
the four formats are one table, `name_map.TABLE`; the models under each format's class
names are another, `architectures.ARCHITECTURES`. Conversion imports Keras (and
TensorFlow for the original release's format alone), so its names are imported on first
use: `bert_tf.checkpoints.portable` and `.restore` load without either.
"""

import importlib

_EXPORTS = {
    "ConversionSummary": "convert", "convert_checkpoint": "convert",
    "FORMATS": "files", "ConversionError": "files",
    "LoadedCheckpoint": "raw_model", "detect_format": "reading", "read_checkpoint": "reading",
    "build_model": "variables", "model_arrays": "variables",
    "save_bert_tf": "writing", "save_checkpoint": "writing", "save_google_tf1": "writing",
    "save_huggingface": "writing", "save_keras_hub": "writing",
}


def __getattr__(name):
  if name not in _EXPORTS:
    raise AttributeError(f"module 'bert_tf.checkpoints' has no attribute '{name}'")
  return getattr(importlib.import_module(f"bert_tf.checkpoints.{_EXPORTS[name]}"), name)
