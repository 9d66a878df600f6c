"""bench/ stands on its own: no module imports from tests/ (by name or by a path into
it), the GPU benchmarks are the four files bench/README.md names, and bench/ stays a
tool, not an archive (at most MAX_BENCH_LINES lines besides its results and README)."""

import ast
import os
import pathlib
import subprocess
import sys

import paths

BENCH = pathlib.Path(paths.ROOT) / "bench"
TESTS = pathlib.Path(paths.ROOT) / "tests"
MAX_BENCH_LINES = 6000


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


def test_bench_stays_within_its_line_budget():
  counted = [p for p in BENCH.rglob("*") if p.is_file() and "results" not in p.parts
             and p.name != "README.md" and "__pycache__" not in p.parts]
  lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in counted)
  assert lines <= MAX_BENCH_LINES, f"bench/ has {lines} lines"


def _bench_modules_tests_import() -> set:
  names = set()
  for path in TESTS.rglob("*.py"):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
      if isinstance(node, ast.ImportFrom) and node.module == "bench" and not node.level:
        names.update(alias.name for alias in node.names)
      elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bench."):
        names.add(node.module[len("bench."):])
  return names


def test_bench_modules_tests_import_define_no_flags_on_import():
  """A flag defined on import would collide with a tool's of the same name once a test
  worker loads both (absl keeps one registry per process)."""
  modules = sorted(_bench_modules_tests_import())
  assert "checkpoint_io" in modules
  script = ("import sys, importlib\nfrom absl import app, flags, logging\n"
            "before = set(flags.FLAGS)\n"
            "for name in sys.argv[1:]:\n"
            "  importlib.import_module('bench.' + name)\n"
            "  added = set(flags.FLAGS) - before\n"
            "  if added: print(name, sorted(added))\n"
            "  before |= added\n")
  result = subprocess.run([sys.executable, "-c", script, *modules], cwd=paths.ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "KERAS_BACKEND": "tensorflow"})
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout == "", result.stdout
