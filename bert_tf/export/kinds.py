"""The kinds of export, every one loaded: each `*_serving` module of this package
registers the ServingModule subclass of its kind when imported
(bert_tf.export.serving_module.register_serving), and importing this module imports
them all, so that the exporter and `bert-tf-query` know every kind without naming one.
"""

import importlib
import pkgutil
from typing import Iterable

import bert_tf.export
from bert_tf.export import serving_module


def _load_serving_modules() -> None:
  """Imports every `*_serving` module of bert_tf.export; each registers its kind."""
  for module in pkgutil.iter_modules(bert_tf.export.__path__):
    if module.name.endswith("_serving"):
      importlib.import_module(f"bert_tf.export.{module.name}")


_load_serving_modules()


def kind_of_outputs(output_names: Iterable[str]) -> str:
  """The kind of an export whose serving_default has these outputs: the kind with an
  answer form (ServingModule.answer_outputs) among them, the largest form deciding
  (squad's outputs hold a regressor's score too); "" when no kind's form is there."""
  names = set(output_names)
  best, best_size = "", 0
  for kind in serving_module.serving_kinds():
    for form in serving_module.serving_class(kind).answer_outputs:
      if form <= names and len(form) > best_size:
        best, best_size = kind, len(form)
  return best
