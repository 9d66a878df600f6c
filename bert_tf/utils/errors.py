"""User errors, and how every command-line tool reports them.

A mistake in what the user gave (a flag, a config entry, an input file, an output path)
is a `UserError` whose message names the file, line or field; an OSError naming its file
(no permission, a path under a file) counts as one too. `run_tool` runs a tool's main so
that such an error is one line `TOOL: error: MESSAGE` on stderr and exit status 1, a
flag mistake one line and exit status 2, and any other exception (a bug) keeps its
traceback. `--verbose` prints the traceback of a user error as well.
"""

import logging
import sys
import traceback
from typing import Callable, Optional

ERROR_EXIT = 1
USAGE_EXIT = 2


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


def run_tool(name: str, main: Callable, quiet_logs: bool = False) -> None:
  """Runs `main(argv)` under absl with one-line error reports (see the module doc).

  Args:
    name: the tool's name, the prefix of its error lines (`train`, `build_vocab`).
    main: absl main; its return value is the exit status.
    quiet_logs: show warnings and errors only of TensorFlow's Python logger and of
      absl logging, so that the tool's own progress lines are what the user reads.
  """
  from absl import app  # pylint: disable=g-import-not-at-top
  from absl import flags  # pylint: disable=g-import-not-at-top
  if quiet_logs:
    from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    absl_logging.set_verbosity(absl_logging.WARNING)
  if "verbose" not in flags.FLAGS:
    flags.DEFINE_bool("verbose", False,
                      "Print the traceback of a reported error as well.")

  def parse(argv):
    try:
      return flags.FLAGS(argv)
    except flags.Error as e:
      print(f"{name}: error: {_one_line(str(e))} (see --help)", file=sys.stderr)
      sys.exit(USAGE_EXIT)

  def reported_main(argv):
    try:
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
