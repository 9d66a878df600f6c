"""Optional dependencies, imported on first use with an error that says how to install
them (a UserError: one line from the tools)."""

import functools
import importlib

from bert_tf.utils import errors


@functools.lru_cache(maxsize=None)
def module(name: str, needed_for: str, install: str):
  """The module `name`, imported once.

  Raises:
    InputError: it is not installed: "`needed_for` needs `name`: `install`".
  """
  try:
    return importlib.import_module(name)
  except ImportError:
    raise errors.InputError(f"{needed_for} needs {name}: {install}") from None
