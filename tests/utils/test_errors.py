"""How every tool runs (bert_tf.utils.errors.run_tool): --help is no failure (exit status
0), and the console holds the tool's own lines: the libraries' logs (absl's and
TensorFlow's INFO lines, a storage client's debug lines) are left out unless absl's
--verbosity asks for them, TensorFlow's C++ level with them. A tool made here runs in
this process; its flags, and the logging levels it set, are restored after it."""

import logging
import os
import sys

import pytest
from absl import flags
from absl import logging as absl_logging

from bert_tf import cpu_kernels
from bert_tf.utils import errors


@pytest.fixture(name="tool")
def _tool(monkeypatch):
  """run(argv) runs a tool whose main logs a library line on three loggers, and returns
  (exit status, the levels the tool left: absl's handler, TensorFlow's logger, the root
  logger)."""
  handler = absl_logging.get_absl_handler()
  loggers = [logging.getLogger(), logging.getLogger("tensorflow")]
  saved = (handler.level, [logger.level for logger in loggers])
  before = set(flags.FLAGS)
  monkeypatch.setattr(cpu_kernels, "_QUIETED", {})

  def main(argv):
    del argv
    print("the tool's own line")
    return 0

  def run(argv):
    flags.FLAGS.unparse_flags()
    monkeypatch.setattr(sys, "argv", ["tool.py", *argv])
    with pytest.raises(SystemExit) as ended:
      errors.run_tool("tool", main)
    levels = (handler.level, loggers[1].level, loggers[0].level)
    return ended.value.code, levels

  yield run
  flags.FLAGS.unparse_flags()
  # absl defines its help flags once a process (the first app.run).
  for name in set(flags.FLAGS) - before - {"help", "helpshort", "helpfull", "helpxml", "?"}:
    delattr(flags.FLAGS, name)
  handler.setLevel(saved[0])
  for logger, level in zip(loggers, saved[1]):
    logger.setLevel(level)


@pytest.mark.parametrize("argv", [["--help"], ["--helpshort"], ["--helpfull"], ["-?"]])
def test_help_asked_for_ends_with_status_0_and_names_verbosity(tool, argv, capsys):
  status, _ = tool(argv)
  assert status == 0
  shown = capsys.readouterr().out
  if argv != ["--helpfull"]:  # --helpfull lists every module's flags under its own name
    assert "-v,--verbosity: Show the libraries' logs" in shown, shown


def test_a_flag_mistake_still_ends_with_status_2(tool, capsys):
  assert tool(["--no_such_flag"])[0] == errors.USAGE_EXIT
  assert capsys.readouterr().err.startswith("tool: error: ")


def test_library_logs_are_left_out_unless_verbosity_asks_for_them(tool, monkeypatch):
  # Quiet: warnings and errors only, whatever level a library sets its own logger to
  # (the absl handler's level bounds every logger that reaches it).
  status, levels = tool([])
  assert status == 0 and levels == (logging.WARNING, logging.ERROR, logging.WARNING)
  # -v 0: every library's INFO lines; TensorFlow's C++ ones too, where the tool's start-up
  # set TF_CPP_MIN_LOG_LEVEL (a level the user set stays).
  monkeypatch.delenv(cpu_kernels.LOG_LEVEL_VARIABLE, raising=False)
  assert cpu_kernels.quiet_startup_logs()
  status, levels = tool(["-v", "0"])
  assert status == 0 and levels == (logging.NOTSET, logging.NOTSET, logging.INFO)
  assert os.environ[cpu_kernels.LOG_LEVEL_VARIABLE] == "0"
  monkeypatch.setenv(cpu_kernels.LOG_LEVEL_VARIABLE, "3")
  assert tool(["--verbosity=1"])[1][2] == logging.DEBUG
  assert os.environ[cpu_kernels.LOG_LEVEL_VARIABLE] == "3"


@pytest.mark.parametrize("verbosity, level", [(1, "0"), (0, "0"), (-1, "1"), (-2, "2"),
                                              (-3, "3"), (-9, "3")])
def test_verbosity_sets_tensorflow_s_cpp_level_where_the_start_up_quieted_it(
    verbosity, level, monkeypatch):
  monkeypatch.setattr(cpu_kernels, "_QUIETED", {})
  monkeypatch.delenv(cpu_kernels.LOG_LEVEL_VARIABLE, raising=False)
  assert not cpu_kernels.show_startup_logs(verbosity)  # nothing quieted: left alone
  assert cpu_kernels.quiet_startup_logs()
  assert cpu_kernels.show_startup_logs(verbosity)
  assert os.environ[cpu_kernels.LOG_LEVEL_VARIABLE] == level
