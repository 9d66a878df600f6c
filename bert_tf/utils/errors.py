"""User errors, and how every command-line tool reports them.

A mistake in what the user gave (a flag, a config entry, an input file, an output path)
is a `UserError` whose message names the file, line or field; an OSError naming its file
(no permission, a path under a file) counts as one too. `run_tool` runs a tool's main so
that such an error is one line `TOOL: error: MESSAGE` on stderr and exit status 1, a
flag mistake one line and exit status 2, and any other exception (a bug) keeps its
traceback. `--verbose` prints the traceback of a user error as well. TOOL is the command
the user typed (`bert-tf-export` for the installed command, else the tool's name). A
tool that needs TensorFlow says so in that line before it reads or writes anything, and
`--help` shows the tool's own flags however it was started, with exit status 0.

A tool's console output is its own lines: the libraries' logs (absl's and TensorFlow's
INFO lines, the storage clients', TensorFlow's C++ start-up lines) are left out, warnings
and errors kept. absl's `--verbosity` (`-v`) shows them from that level on (0 info, 1
debug, -1 warnings; TensorFlow's C++ logs too where TensorFlow has not loaded yet).
"""

import logging
import os
import sys
import traceback
from typing import Callable, Optional

ERROR_EXIT = 1
USAGE_EXIT = 2
# The prefix of the running tool's error lines (run_tool sets it), for end_process.
_tool_name = None


class UserError(Exception):
  """A mistake in the user's flags, configuration, inputs or outputs.

  The library raises its user errors as this family (each kind also derives from the
  builtin type callers would catch: ValueError, FileNotFoundError, ...).
  """


class InputError(UserError, ValueError):
  """An input file or value that cannot be used as given."""


class MissingInputError(UserError, FileNotFoundError):
  """A named input (file, pattern, checkpoint) that does not exist."""


class OutputExistsError(UserError, FileExistsError):
  """An output that exists already and may not be replaced."""


class OutputPathError(UserError, OSError):
  """An output that cannot be written where it is asked for."""


def _one_line(text: str) -> str:
  return " ".join(text.split())


def user_message(error: BaseException) -> Optional[str]:
  """The one-line report of a user error; None for anything else (a bug)."""
  if isinstance(error, UserError):
    return _one_line(str(error))
  if isinstance(error, OSError) and error.filename is not None:
    # open(), os.makedirs(), ...: the environment refused a path the user named.
    reason = error.strerror or type(error).__name__
    return _one_line(f"{error.filename}: {reason}")
  return None


# The installed commands' names (setup.py's CONSOLE_SCRIPTS) begin so.
COMMAND_PREFIX = "bert-tf-"


def command_name(name: str, argv0: Optional[str] = None) -> str:
  """The prefix of a tool's error lines: the installed command the user typed
  (`bert-tf-export`), else the tool's own name (`export_saved_model`)."""
  typed = os.path.basename(sys.argv[0] if argv0 is None else argv0)
  return typed if typed.startswith(COMMAND_PREFIX) else name


def _show_tool_flags_in_help(main: Callable) -> None:
  """Makes absl's --help describe the tool: its docstring and its flags.

  absl's help shows the flags defined by the module named sys.argv[0] and the docstring
  of __main__; an installed command's __main__ is pip's launcher, and its flags belong
  to `bert_tf.tools.NAME`. The tool's flags (and --verbose, --verbosity) become key flags of
  sys.argv[0], and its docstring that of a launcher without one.
  """
  from absl import flags  # pylint: disable=g-import-not-at-top
  for module_name in (main.__module__, __name__):
    for flag in flags.FLAGS.flags_by_module_dict().get(module_name, []):
      flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
  flags.FLAGS.register_key_flag_for_module(sys.argv[0], flags.FLAGS["verbosity"])
  launcher, tool = sys.modules.get("__main__"), sys.modules.get(main.__module__)
  if (launcher is not None and tool is not None and launcher is not tool
      and not launcher.__doc__):
    launcher.__doc__ = tool.__doc__


# absl's flags that print help and end the process (with status 1, as absl has it).
_HELP_FLAGS = ("help", "helpshort", "helpfull", "helpxml", "?")
VERBOSITY_HELP = ("Show the libraries' logs (absl, TensorFlow, the storage clients) from "
                  "this level on: 0 info, 1 debug, -1 warnings. Left out, a tool prints its "
                  "own lines, and the libraries' warnings and errors.")


def _asks_for_help(argv) -> bool:
  return any(arg.lstrip("-").split("=", 1)[0] in _HELP_FLAGS
             for arg in argv[1:] if arg.startswith("-"))


def _quiet_library_logs() -> None:
  """The libraries' INFO lines left out: absl's verbosity at warnings (set before absl
  parses the flags, which would raise it to info; --verbosity still sets it), the absl
  handler at warnings (whatever level a library sets its own logger to: gcsfs logs each
  request at debug where it is asked to), TensorFlow's Python logger at errors."""
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
  absl_logging.set_verbosity(absl_logging.WARNING)
  absl_logging.get_absl_handler().setLevel(logging.WARNING)
  logging.getLogger("tensorflow").setLevel(logging.ERROR)


def _show_library_logs(verbosity: int) -> None:
  """--verbosity given: every logger at absl's level (which absl has set), and
  TensorFlow's C++ logs at the same level where the tool's start-up quieted them."""
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
  from bert_tf import cpu_kernels  # pylint: disable=g-import-not-at-top
  absl_logging.get_absl_handler().setLevel(logging.NOTSET)
  logging.getLogger("tensorflow").setLevel(logging.NOTSET)
  cpu_kernels.show_startup_logs(verbosity)


def run_tool(name: str, main: Callable,
             needs: Optional[Callable[[], None]] = None) -> None:
  """Runs `main(argv)` under absl with one-line error reports and the libraries' logs
  left out unless --verbosity asks for them (see the module doc).

  Args:
    name: the tool's name, the prefix of its error lines (`train`, `build_vocab`)
      unless it runs as an installed `bert-tf-*` command.
    main: absl main; its return value is the exit status.
    needs: called after flag parsing (--help works without it), before `main`: raises
      a UserError where the tool cannot run in this install (e.g.
      bert_tf.utils.optional.tensorflow_for_tools: TensorFlow is missing), so that
      the one line comes before anything is read or written.
  """
  from absl import app  # pylint: disable=g-import-not-at-top
  from absl import flags  # pylint: disable=g-import-not-at-top
  global _tool_name
  name = _tool_name = command_name(name)
  _quiet_library_logs()
  if "verbose" not in flags.FLAGS:
    flags.DEFINE_bool("verbose", False,
                      "Print the traceback of a reported error as well.")
  flags.FLAGS["verbosity"].help = VERBOSITY_HELP
  _show_tool_flags_in_help(main)

  def parse(argv):
    try:
      return flags.FLAGS(argv)
    except flags.Error as e:
      print(f"{name}: error: {_one_line(str(e))} (see --help)", file=sys.stderr)
      sys.exit(USAGE_EXIT)
    except SystemExit as e:
      # absl ends --help with status 1; help that was asked for is no failure.
      if e.code == 1 and _asks_for_help(argv):
        sys.exit(0)
      raise

  def reported_main(argv):
    if flags.FLAGS["verbosity"].present:
      _show_library_logs(flags.FLAGS.verbosity)
    try:
      if needs is not None:
        needs()
      return main(argv)
    except app.UsageError as e:
      _report(name, e, flags.FLAGS.verbose)
      return USAGE_EXIT
    except Exception as e:  # pylint: disable=broad-except
      if user_message(e) is None:
        raise
      _report(name, e, flags.FLAGS.verbose)
      return ERROR_EXIT

  app.run(reported_main, flags_parser=parse)


def _report(name: str, error: BaseException, verbose: bool) -> None:
  if verbose:
    traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
  message = user_message(error) or _one_line(str(error))
  print(f"{name}: error: {message}", file=sys.stderr, flush=True)


def end_process(message: str) -> None:
  """Ends this process with the one-line report of a user error, from a thread other than
  the main one where the main thread cannot raise it (it waits in a call that never
  returns): `TOOL: error: MESSAGE` on stderr (without a tool, `error: MESSAGE`) and exit
  status 1, without running exit handlers that could wait on the same call."""
  prefix = f"{_tool_name}: error: " if _tool_name else "error: "
  print(prefix + _one_line(message), file=sys.stderr, flush=True)
  sys.stdout.flush()
  os._exit(ERROR_EXIT)  # pylint: disable=protected-access
