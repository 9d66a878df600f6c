"""What the tests of bench/ share: importing a benchmark for its functions, and a
sitecustomize that makes TensorFlow unimportable in a run's processes."""

import importlib
import os
import re
import textwrap

from absl import flags

import paths


def import_without_flags(name):
  """Imports the benchmark bench.<name>, then drops the absl flags it defined:
  benchmarks share flag names (--output, ...), as do the tools other tests of this
  process import. A benchmark imported before is returned as it is."""
  before = set(flags.FLAGS)
  module = importlib.import_module(f"bench.{name}")
  for flag in set(flags.FLAGS) - before:
    delattr(flags.FLAGS, flag)
  return module


# A sitecustomize.py imported at Python start-up by every process of a run (PYTHONPATH):
# every import of TensorFlow fails, as on a machine without it, and its stack is
# written to $TF_IMPORT_LOG. Probes through importlib.util.find_spec load nothing and
# are let through (torch._dynamo asks where TensorFlow is installed, to leave its files
# alone when tracing).
NO_TENSORFLOW_SITECUSTOMIZE = textwrap.dedent("""\
    import os, sys, traceback
    class _NoTensorFlow:
      def find_spec(self, name, path=None, target=None):
        if name != "tensorflow" and not name.startswith("tensorflow."):
          return None
        stack = traceback.extract_stack()
        if len(stack) >= 3 and stack[-3].name == "find_spec":
          return None
        with open(os.environ["TF_IMPORT_LOG"], "a") as log:
          log.write("".join(traceback.format_list(stack)) + "\\n")
        raise ModuleNotFoundError("No module named 'tensorflow' (blocked)", name=name)
    sys.meta_path.insert(0, _NoTensorFlow())
    """)


def tensorflow_importers(log_text: str) -> set:
  """The frames that asked for TensorFlow in a NO_TENSORFLOW_SITECUSTOMIZE log: for
  each blocked import, (file, function) of the last frame outside the import
  machinery (and outside cpu_kernels.import_tensorflow_quietly), the file relative to site-packages or to the checkout."""
  frame = re.compile(r'^  File "(.*)", line \d+, in (.*)$', re.M)
  importers = set()
  for stack in log_text.split("\n\n"):
    # import_tensorflow_quietly imports for its caller: the caller is the one asking.
    frames = [(path, name) for path, name in frame.findall(stack)
              if not path.startswith("<frozen") and
              not path.endswith(("importlib/__init__.py", "sitecustomize.py")) and
              not (path.endswith("cpu_kernels.py") and name == "import_tensorflow_quietly")]
    if frames:
      path, name = frames[-1]
      if path.startswith(paths.ROOT + os.sep):
        path = os.path.relpath(path, paths.ROOT)
      importers.add((path.rsplit("site-packages/", 1)[-1], name))
  return importers
