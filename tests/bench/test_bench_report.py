"""docs/benchmark-tables.md is bench/results/ joined (bench/report.py), and a benchmark
that records rewrites its table there and the page with it (bench/common.py)."""

import os
import subprocess
import sys

import pytest

from bench import common
from bench import report
import paths


def test_the_docs_page_is_up_to_date_with_bench_results():
  with open(report.OUTPUT) as f:
    assert f.read() == report.render(), "run: python -m bench.report"


def test_every_section_file_in_bench_results_is_on_the_page():
  on_disk = {name[:-len(".md")] for name in os.listdir(report.RESULTS_DIR)
             if name.endswith(".md")}
  assert on_disk == set(report.SECTIONS)


def test_check_fails_in_one_line_on_a_stale_page(monkeypatch, tmp_path, capsys):
  monkeypatch.setattr(report, "OUTPUT", str(tmp_path / "tables.md"))
  (tmp_path / "tables.md").write_text("stale\n")
  assert report.main(["report", "--check"]) == 1
  assert capsys.readouterr().err.count("\n") == 1
  assert report.main(["report"]) == 0
  assert report.main(["report", "--check"]) == 0


def test_the_report_imports_nothing_outside_the_standard_library():
  code = ("import sys; import bench.report; "
          "print(sorted(m for m in sys.modules if m.split('.')[0] in "
          "('bert_tf', 'absl', 'numpy', 'tensorflow', 'jax', 'keras')))")
  out = subprocess.run([sys.executable, "-c", code], cwd=paths.ROOT, check=True,
                       capture_output=True, text=True).stdout
  assert out.strip() == "[]"


def test_recording_rewrites_only_the_table_and_then_the_page(monkeypatch, tmp_path):
  monkeypatch.setattr(report, "RESULTS_DIR", str(tmp_path))
  monkeypatch.setattr(report, "OUTPUT", str(tmp_path / "page.md"))
  monkeypatch.setattr(report, "SECTIONS", ("a_bench",))
  (tmp_path / "a_bench.md").write_text(
      "## A bench\n\nBy hand.\n\n<!-- BEGIN a_bench -->\nold\n<!-- END a_bench -->\n\nAfter.\n")
  common.update_table("a_bench", "| new |")
  assert (tmp_path / "a_bench.md").read_text() == (
      "## A bench\n\nBy hand.\n\n<!-- BEGIN a_bench -->\n| new |\n<!-- END a_bench -->\n\n"
      "After.\n")
  page = (tmp_path / "page.md").read_text()
  assert "By hand.\n\n| new |\n\nAfter." in page and "<!--" not in page


def test_a_section_without_markers_is_refused_before_the_run(monkeypatch, tmp_path):
  monkeypatch.setattr(report, "RESULTS_DIR", str(tmp_path))
  (tmp_path / "a_bench.md").write_text("## A bench\n")
  with pytest.raises(ValueError, match="no section markers"):
    common.require_table("a_bench")
