"""Names for what a test registers (a task, a record kind, a reader of a raw format, a
kind of export, a kernel set), and taking the registration back.

The registries are global to the process and refuse a name twice, so a test that
registered `toy_lines` would break, at collection, beside a module of the package or of
a contributor that registers `toy_lines` too. A test names its entries with
`local_name(stem, __file__)` ("toy_lines__test_toy_record_kind"): unlike any name a
module of the package takes, and the same in every process (pytest's, pytest-xdist's
workers', the test module run as a script in a process of another engine). `registered` holds a
registration for a with block (or a fixture) and undoes it after.
"""

import contextlib
import os
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")


def local_name(stem: str, module_file: str) -> str:
  """A registry name for a test module's own entry: `stem` followed by the name of the
  test module (`module_file`, its `__file__`), "toy_kernels__test_kernel_registry"."""
  return f"{stem}__{os.path.splitext(os.path.basename(module_file))[0]}"


@contextlib.contextmanager
def registered(register: Callable[[], T], unregister: Callable[[], object]) -> Iterator[T]:
  """Registers with `register()` for the with block, then calls `unregister()` (also
  when the block fails); yields what `register()` returned."""
  entry = register()
  try:
    yield entry
  finally:
    unregister()
