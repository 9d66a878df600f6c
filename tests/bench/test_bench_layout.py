"""bench/ stands on its own: no module imports from tests/ (by name or by a path into
it), and the GPU benchmarks are the four files bench/README.md names."""

import ast
import pathlib

import paths

BENCH = pathlib.Path(paths.ROOT) / "bench"
TESTS = pathlib.Path(paths.ROOT) / "tests"


def _imported_modules(path: pathlib.Path) -> set:
  names = set()
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    if isinstance(node, ast.Import):
      names.update(alias.name.split(".")[0] for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      names.add(node.module.split(".")[0])
  return names


def test_no_bench_module_imports_from_tests():
  test_modules = {p.stem for p in TESTS.rglob("*.py")} | {"tests"}
  offenders = {}
  for path in BENCH.rglob("*.py"):
    found = _imported_modules(path) & test_modules
    text = path.read_text(encoding="utf-8")
    if '"tests"' in text or "'tests'" in text:
      found.add("a path into tests/")
    if found:
      offenders[str(path.relative_to(BENCH))] = sorted(found)
  assert not offenders, offenders


def test_the_gpu_benchmarks_are_four_files():
  assert sorted(p.name for p in BENCH.glob("gpu*")) == [
      "gpu.sh", "gpu_pretraining.py", "gpu_trainer.py", "gpu_worker.py"]
