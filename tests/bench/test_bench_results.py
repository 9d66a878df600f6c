"""Where a benchmark run writes (bench/common.py): a run that records writes
bench/results/; a check (--nowrite_readme) writes into its own folder, so that it leaves
the recorded figures alone and checks run side by side keep their files apart."""

import os

from absl import flags

from bench import common


def _flag_values(write_readme=None):
  values = flags.FlagValues()
  if write_readme is not None:
    flags.DEFINE_bool("write_readme", True, "", flag_values=values)
    values(["prog", f"--{'' if write_readme else 'no'}write_readme"])
  else:
    values(["prog"])
  return values


def test_only_a_run_with_write_readme_off_is_a_check():
  assert common.records_run(_flag_values(write_readme=True))
  assert not common.records_run(_flag_values(write_readme=False))
  assert common.records_run(_flag_values())


def test_a_check_writes_and_merges_its_results_in_its_own_folder(monkeypatch, tmp_path):
  monkeypatch.setattr(common, "LOG_DIR", str(tmp_path / "logs"))
  monkeypatch.setattr(common, "RESULTS_DIR", str(tmp_path / "results"))
  monkeypatch.setattr(common, "records_run", lambda: False)
  common.run_dir.cache_clear()
  try:
    common.merge_results("a_bench", "configs", {"mini": {"step": 1}})
    path = common.merge_results("a_bench", "configs", {"base": {"step": 2}})
    assert os.path.dirname(path) == common.run_dir()
    assert common.run_dir().startswith(str(tmp_path / "logs") + os.sep)
    assert not os.path.exists(tmp_path / "results")
    assert common._read_json(path) == {"configs": {"mini": {"step": 1},
                                                   "base": {"step": 2}}}
  finally:
    common.run_dir.cache_clear()


def test_two_runs_get_different_folders(monkeypatch, tmp_path):
  monkeypatch.setattr(common, "LOG_DIR", str(tmp_path))
  common.run_dir.cache_clear()
  first = common.run_dir()
  monkeypatch.setattr(os, "getpid", lambda: -1)
  common.run_dir.cache_clear()
  try:
    assert common.run_dir() != first
    assert os.path.isdir(first) and os.path.isdir(common.run_dir())
  finally:
    common.run_dir.cache_clear()
