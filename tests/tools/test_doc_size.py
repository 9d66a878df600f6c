"""The documentation stays a product a reader gets through: README.md, docs/*.md,
CONTRIBUTING.md and bench/README.md together within 160,000 characters, and the
generated benchmark tables within 25,000. A page that grows past its share is condensed
(or its history dropped), not the limit raised."""

import glob
import os

import paths

DOCS_LIMIT = 160_000
BENCHMARK_TABLES_LIMIT = 25_000


def _characters(path: str) -> int:
  with open(path, encoding="utf-8") as f:
    return len(f.read())


def test_the_documentation_stays_within_its_size():
  pages = [os.path.join(paths.ROOT, name)
           for name in ("README.md", "CONTRIBUTING.md", os.path.join("bench", "README.md"))]
  pages += sorted(glob.glob(os.path.join(paths.ROOT, "docs", "*.md")))
  sizes = {os.path.relpath(page, paths.ROOT): _characters(page) for page in pages}
  assert sum(sizes.values()) <= DOCS_LIMIT, sorted(sizes.items(), key=lambda kv: -kv[1])


def test_the_benchmark_tables_stay_within_their_size():
  tables = os.path.join(paths.ROOT, "docs", "benchmark-tables.md")
  assert _characters(tables) <= BENCHMARK_TABLES_LIMIT
