"""Readers of the fine-tuning tasks' raw files (GLUE TSV, CoNLL, SQuAD JSON, SWAG CSV) and
SQuAD's answers from the model's logits.

Importing this package registers the reader of every raw format its modules define
(bert_tf.data.task_files.readers), so that a format is read wherever the package is
imported, whichever record kind reads it.
"""

import importlib
import pkgutil

# Importing every module of this package registers its readers.
for _module in pkgutil.iter_modules(__path__):
  importlib.import_module(f"{__name__}.{_module.name}")
