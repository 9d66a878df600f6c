"""The inputs of pretraining data creation: the text files, the check that they are text,
and the vocab's special ids.

Files are opened through bert_tf.utils.files (local ones directly, remote ones through
the package's file-system layer); importing this module needs no TensorFlow.
"""

import dataclasses
from typing import List, Optional

from bert_tf.data.creation import pretraining_instances as pi
from bert_tf.data.records.pretraining_format import PretrainingDataError
from bert_tf.text import vocab as vocab_lib
from bert_tf.utils import files as files_lib

# An input with more of its lines not UTF-8 than this is taken for a file that is not text.
MAX_INVALID_UTF8_LINE_FRACTION = 0.01
# Invalid lines named in the warning, per file.
_SHOWN_INVALID_LINES = 5
# How much of a file the text check reads: all of a local one, the start of a remote one
# (reading a bucket's corpus twice would double the launcher's I/O).
_REMOTE_TEXT_CHECK_BYTES = 1 << 20
_TEXT_CHECK_BLOCK = 4 << 20


def list_input_files(input_file: str) -> List[str]:
  """Expands comma-separated globs (see `bert_tf.utils.files.expand_patterns`)."""
  return files_lib.expand_patterns(input_file, field="--input_file", error=PretrainingDataError)


@dataclasses.dataclass
class TextCheck:
  """What `check_text_file` found in one input file."""

  path: str
  lines: int = 0
  invalid_lines: int = 0
  first_invalid: List[int] = dataclasses.field(default_factory=list)
  complete: bool = True  # False: only the start of a remote file was read.

  def warning(self) -> Optional[str]:
    """One line naming the file and its first invalid lines; None when all are UTF-8."""
    if not self.invalid_lines:
      return None
    shown = ", ".join(str(n) for n in self.first_invalid)
    more = ", ..." if self.invalid_lines > len(self.first_invalid) else ""
    scope = "" if self.complete else f" in its first {self.lines} lines"
    return (f"{self.path}: {self.invalid_lines} line(s) not valid UTF-8{scope} (lines "
            f"{shown}{more}); their invalid bytes become U+FFFD")


def check_text_file(path: str) -> TextCheck:
  """Checks that an input file is UTF-8 text: no NUL byte, at most
  MAX_INVALID_UTF8_LINE_FRACTION of its lines invalid UTF-8.

  Reads local files in full (blocks decoded at C speed, lines looked at one by one only
  in a block that fails to decode) and the first MiB of remote ones.

  Returns:
    TextCheck with the line counts and the first invalid lines (1-based).

  Raises:
    PretrainingDataError: naming the file, and the byte offset of a NUL byte or the
      share of invalid lines.
  """
  check = TextCheck(path)
  limit = None if files_lib.is_local(path) else _REMOTE_TEXT_CHECK_BYTES
  read = 0
  pending = b""
  with files_lib.open_input(path) as f:
    while True:
      want = _TEXT_CHECK_BLOCK if limit is None else min(_TEXT_CHECK_BLOCK, limit - read)
      data = f.read(want) if want > 0 else b""
      nul = data.find(b"\0")
      if nul >= 0:
        raise PretrainingDataError(f"{path}: not a text file (a NUL byte at byte offset "
                                   f"{read + nul})")
      read += len(data)
      if not data:
        check.complete = want > 0
        # The tail of a file read only in part may end inside a character.
        block, pending = (pending if check.complete else b""), b""
      else:
        pending += data
        cut = pending.rfind(b"\n") + 1  # Whole lines only; the rest waits.
        block, pending = pending[:cut], pending[cut:]
      if block:
        _count_lines(block, check)
      if not data:
        break
  if check.invalid_lines > MAX_INVALID_UTF8_LINE_FRACTION * max(check.lines, 1):
    raise PretrainingDataError(
        f"{path}: not a UTF-8 text file ({check.invalid_lines} of its {check.lines} lines "
        f"{'read ' if not check.complete else ''}are not valid UTF-8, first at line(s) "
        f"{', '.join(str(n) for n in check.first_invalid)})")
  return check


def _count_lines(block: bytes, check: TextCheck) -> None:
  """Adds a block of whole lines (the last one may lack its newline) to `check`."""
  try:
    block.decode("utf-8")
    check.lines += block.count(b"\n") + (not block.endswith(b"\n"))
    return
  except UnicodeDecodeError:
    pass
  lines = block.split(b"\n")
  if lines[-1] == b"":
    lines.pop()
  for number, line in enumerate(lines, start=check.lines + 1):
    try:
      line.decode("utf-8")
    except UnicodeDecodeError:
      check.invalid_lines += 1
      if len(check.first_invalid) < _SHOWN_INVALID_LINES:
        check.first_invalid.append(number)
  check.lines += len(lines)


def load_special_ids(vocab_file: str, lower_case: Optional[bool] = None) -> pi.SpecialIds:
  """The vocab's special ids and size, read by `bert_tf.text.vocab.load_vocab` (its
  casing checked against `lower_case` where given).

  Raises:
    PretrainingDataError: naming the file (and line) when it is missing, malformed,
      lacks a special token or has the other casing than lower_case.
  """
  if not vocab_file:
    raise PretrainingDataError("Vocab file not found: '' (pass --vocab_file)")
  try:
    return pi.SpecialIds.from_vocab(vocab_lib.load_vocab(vocab_file, lower_case), vocab_file)
  except (FileNotFoundError, ValueError) as e:
    raise PretrainingDataError(str(e)) from None
