"""What the tests of bench/ share: importing a benchmark script for its functions."""

import importlib
import sys

from absl import flags

import paths

if paths.BENCH_DIR not in sys.path:
  sys.path.insert(0, paths.BENCH_DIR)


def import_without_flags(name):
  """Imports the benchmark script bench/<name>.py, then drops the absl flags it defined:
  scripts share flag names (--output, ...), as do the tools other tests of this process
  import. A script imported before is returned as it is."""
  before = set(flags.FLAGS)
  module = importlib.import_module(name)
  for flag in set(flags.FLAGS) - before:
    delattr(flags.FLAGS, flag)
  return module
