"""Optional dependencies, imported on first use with an error that says how to install
them (a UserError: one line from the tools), and the install command that fits this
environment: an extra of bert_tf where TensorFlow is installed, the packages alone where
it is not (an extra brings bert_tf's own requirements, TensorFlow among them)."""

import functools
import importlib
import importlib.util
import sys
from typing import Optional

from bert_tf import cpu_kernels
from bert_tf.utils import errors

# The install of bert_tf with TensorFlow and tensorflow-text (setup.py's requirements):
# from its source (bert_tf is on no package index), and apart from a TensorFlow-free
# install, which TensorFlow's requirements would change (README.md, Installing).
TENSORFLOW_INSTALL = ("bert_tf's full install, pip install . in its source checkout (or "
                      "its wheel), in an environment apart from the TensorFlow-free one "
                      "(README.md, Installing)")
# What each extra installs without TensorFlow: `pip install PACKAGES`, or the
# requirements/ file of the checkout that lists them.
_EXTRA_PACKAGES = {
    "gcs": ("gcsfs", "requirements/gcs.txt"),
    "s3": ("s3fs", "requirements/s3.txt"),
    "hf": ("safetensors", None),
    "jax": ("jax grain tokenizers", "requirements/jax.txt"),
}


def installed(name: str) -> bool:
  """Whether module `name` can be imported, found without importing it (a None entry in
  sys.modules, which makes its import fail, counts as absent)."""
  if name in sys.modules:
    return sys.modules[name] is not None
  try:
    return importlib.util.find_spec(name) is not None
  except (ImportError, ValueError):
    return False


def tensorflow_installed() -> bool:
  """Whether TensorFlow and tensorflow-text, which bert_tf's full install brings, are."""
  return installed("tensorflow") and installed("tensorflow_text")


def extra_install(extra: str) -> str:
  """The command that installs the optional extra `extra` (gcs, s3, hf, jax) here:
  `pip install 'bert_tf[EXTRA]'` beside TensorFlow; without it the extra's packages
  alone, which keeps TensorFlow out."""
  if tensorflow_installed():
    return f"pip install 'bert_tf[{extra}]'"
  packages, requirements = _EXTRA_PACKAGES[extra]
  return f"pip install {packages}" + (f" (or -r {requirements})" if requirements else "")


def require_tensorflow(needed_for: Optional[str] = None) -> None:
  """Raises InputError unless TensorFlow and tensorflow-text are installed:
  "[`needed_for` ]needs TensorFlow (and tensorflow-text): TENSORFLOW_INSTALL", found
  without importing them."""
  if not tensorflow_installed():
    prefix = f"{needed_for} " if needed_for else ""
    raise errors.InputError(f"{prefix}needs TensorFlow (and tensorflow-text): "
                            f"{TENSORFLOW_INSTALL}")


def tensorflow_for_tools() -> None:
  """What a tool that needs TensorFlow checks first (errors.run_tool's `needs`):
  `require_tensorflow`, then TensorFlow imported without its start-up lines
  (cpu_kernels.import_tensorflow_quietly)."""
  require_tensorflow()
  cpu_kernels.import_tensorflow_quietly()


def require(name: str, needed_for: str, install: str) -> None:
  """Raises InputError "`needed_for` needs `name`: `install`" unless module `name` is
  installed (found, not imported: a check before anything is written)."""
  if not installed(name):
    raise errors.InputError(f"{needed_for} needs {name}: {install}")


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
