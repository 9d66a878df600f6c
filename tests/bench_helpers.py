"""What the tests of bench/ share: importing a benchmark for its functions."""

import importlib

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
