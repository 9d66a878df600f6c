"""Small modules: no module of the package is over MAX_MODULE_LINES lines (CONTRIBUTING.md,
*Layout and the layer contract*); one that grows past it is split by concept."""

import pathlib

import paths

MAX_MODULE_LINES = 450


def test_no_module_of_the_package_is_over_the_limit():
  over = {}
  for path in (pathlib.Path(paths.ROOT) / "bert_tf").rglob("*.py"):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    if lines > MAX_MODULE_LINES:
      over[str(path.relative_to(paths.ROOT))] = lines
  assert not over, over
