"""The package's layers import only downward: a contract over the whole import graph.

Every `import` and `from ... import` of a `bert_tf` module is checked, at module level
and inside functions alike (a lazy import is still a dependency), against the layer
order in `LAYERS`, which CONTRIBUTING.md's *Layout and the layer contract* writes
down. A module may import its own layer and the layers below it; `tools/` and `bench/`
sit above everything.
"""

import ast
import pathlib
import sys

import pytest
import paths

ROOT = pathlib.Path(paths.ROOT)
PACKAGE = ROOT / "bert_tf"

# Bottom to top. A module belongs to the first entry that is it or a package above it.
LAYERS = (
    ("bert_tf", "bert_tf.constants", "bert_tf.configs", "bert_tf.cpu_kernels",
     "bert_tf.utils"),
    ("bert_tf.layers", "bert_tf.kernels.protocol"),
    ("bert_tf.models",),
    ("bert_tf.text",),
    ("bert_tf.metrics", "bert_tf.losses"),
    ("bert_tf.kernels",),
    ("bert_tf.data",),
    ("bert_tf.checkpoints",),
    ("bert_tf.tasks",),
    ("bert_tf.training",),
    ("bert_tf.export",),
    ("bert_tf.feature_extraction", "bert_tf.inference"),
)


def layer_of(module: str) -> int:
  """The index in LAYERS of a dotted bert_tf module name (its deepest matching entry)."""
  best, best_length = None, -1
  for index, names in enumerate(LAYERS):
    for name in names:
      if (module == name or module.startswith(name + ".")) and len(name) > best_length:
        best, best_length = index, len(name)
  if best is None:
    raise KeyError(module)
  return best


def module_name(path: pathlib.Path) -> str:
  parts = list(path.relative_to(ROOT).with_suffix("").parts)
  if parts[-1] == "__init__":
    parts.pop()
  return ".".join(parts)


def imported_modules(path: pathlib.Path):
  """(line, dotted name) of every bert_tf module that the file imports, anywhere in it."""
  tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
  package = module_name(path)
  if path.name != "__init__.py":
    package = package.rpartition(".")[0]
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        yield node.lineno, alias.name
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        anchor = package.split(".")
        anchor = anchor[:len(anchor) - node.level + 1]
        base = ".".join(anchor + ([base] if base else []))
      for alias in node.names:
        # `from bert_tf.data.task_files import glue` imports the module bert_tf.data.task_files.glue.
        candidate = f"{base}.{alias.name}"
        candidate_path = ROOT / pathlib.Path(*candidate.split("."))
        if candidate_path.with_suffix(".py").exists() or candidate_path.is_dir():
          yield node.lineno, candidate
        else:
          yield node.lineno, base


def upward_imports(paths):
  """`file:line: importer (layer i) imports module (layer j > i)` for every violation."""
  problems = []
  for path in paths:
    importer = module_name(path)
    own = layer_of(importer)
    for line, module in imported_modules(path):
      if module != "bert_tf" and not module.startswith("bert_tf."):
        continue
      if layer_of(module) > own:
        problems.append(f"{path.relative_to(ROOT)}:{line}: {importer} (layer {own}) imports "
                        f"{module} (layer {layer_of(module)})")
  return problems


def package_files():
  return sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer():
  for path in package_files():
    layer_of(module_name(path))


def test_no_module_imports_a_layer_above_its_own():
  problems = upward_imports(package_files())
  assert not problems, "Upward imports:\n" + "\n".join(problems)


def test_the_contract_catches_an_upward_import(tmp_path, monkeypatch):
  """A deliberate upward import (layers -> tasks, inside a function) is reported."""
  layer_dir = tmp_path / "bert_tf" / "layers"
  layer_dir.mkdir(parents=True)
  (tmp_path / "bert_tf" / "tasks").mkdir()
  (tmp_path / "bert_tf" / "tasks" / "base.py").write_text("")
  bad = layer_dir / "bad.py"
  bad.write_text("def f():\n  from bert_tf.tasks import base\n  return base\n")
  monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
  assert upward_imports([bad]) == [
      "bert_tf/layers/bad.py:2: bert_tf.layers.bad (layer 1) imports bert_tf.tasks.base "
      "(layer 8)"]


@pytest.mark.parametrize("module,layer", [("bert_tf.configs", 0), ("bert_tf.layers.dense", 1),
                                          ("bert_tf.tasks.base", 8), ("bert_tf.export", 10)])
def test_layer_of_known_modules(module, layer):
  assert layer_of(module) == layer


def import_circles(paths):
  """The sets of modules (two or more) that import one another in a loop, at module level
  or inside functions, found as the strongly connected components of the import graph."""
  graph = {}
  for path in paths:
    importer = module_name(path)
    graph.setdefault(importer, set()).update(
        module for _, module in imported_modules(path)
        if module.startswith("bert_tf.") and module != importer)
  index, low, stack, on_stack, circles = {}, {}, [], set(), []

  def visit(node):
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for successor in graph.get(node, ()):
      if successor not in index:
        visit(successor)
        low[node] = min(low[node], low[successor])
      elif successor in on_stack:
        low[node] = min(low[node], index[successor])
    if low[node] == index[node]:
      component = set()
      while True:
        member = stack.pop()
        on_stack.discard(member)
        component.add(member)
        if member == node:
          break
      if len(component) > 1:
        circles.append(sorted(component))

  for node in sorted(graph):
    if node not in index:
      visit(node)
  return circles


def test_no_modules_import_each_other_in_a_circle():
  assert import_circles(package_files()) == []


def test_the_circle_check_finds_two_modules_that_import_each_other(tmp_path, monkeypatch):
  package = tmp_path / "bert_tf" / "checkpoints"
  package.mkdir(parents=True)
  (package / "one.py").write_text("from bert_tf.checkpoints import two\n")
  (package / "two.py").write_text("def f():\n  from bert_tf.checkpoints import one\n")
  monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
  assert import_circles(sorted(package.glob("*.py"))) == [
      ["bert_tf.checkpoints.one", "bert_tf.checkpoints.two"]]
