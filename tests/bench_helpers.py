"""What the tests of bench/ share: importing a benchmark for its functions, and a
sitecustomize that makes TensorFlow unimportable in a run's processes."""

import importlib
import textwrap

from absl import flags


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
