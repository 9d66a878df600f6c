"""Tasks: each module registers one task family with bert_tf.tasks.base.register_task."""

import importlib
import pkgutil

# Importing every module of this package registers its tasks.
for _module in pkgutil.iter_modules(__path__):
  if _module.name != "base":
    importlib.import_module(f"{__name__}.{_module.name}")
