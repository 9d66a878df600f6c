"""tools/setup_and_run.py's set-up: a failed pip install is one error line, and nothing
is recorded as installed."""

import pytest

from tools import setup_and_run


def test_a_failed_install_is_one_line_and_leaves_no_stamp(tmp_path, monkeypatch):
  venv = tmp_path / "venv"
  (venv / "bin").mkdir(parents=True)
  (venv / "bin" / "python").write_text("")
  monkeypatch.setattr(setup_and_run, "VENV", venv)
  monkeypatch.setattr(setup_and_run, "STAMP", venv / ".bert_tf_installed")
  calls = []
  monkeypatch.setattr(setup_and_run.subprocess, "call",
                      lambda command: calls.append(command) or (1 if len(calls) == 2 else 0))
  with pytest.raises(SystemExit) as exit_info:
    setup_and_run.ensure_environment(["test"])
  message = str(exit_info.value)
  assert message.startswith("setup_and_run: error: 'pip install -q -e ")
  assert "\n" not in message
  assert len(calls) == 2 and not (venv / ".bert_tf_installed").exists()
