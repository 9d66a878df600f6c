"""Reader for CoNLL-format token-tagging files (CoNLL-2003 NER and the like).

One token a line, columns separated by whitespace, the word first and its tag last;
sentences end at a blank line; `-DOCSTART-` lines separate documents and are
dropped. A file whose lines hold only the word is read unlabelled. Tags may be
IOB1, IOB2 or IOBES; they are kept as written.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Sequence

from bert_tf.data.task_files import readers
from bert_tf.data.task_files.glue import GlueFormatError

DOCSTART = "-DOCSTART-"

# The CoNLL-2003 NER tag set in both IOB1 and IOB2 spelling.
CONLL2003_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC",
                    "I-MISC")


@dataclasses.dataclass
class TaggingExample:
  """One sentence: its words and, in labelled files, one tag per word."""

  index: int
  words: List[str]
  tags: Optional[List[str]]


def _check_tag(tag: str, where: str, label_names: Sequence[str]) -> None:
  if label_names:
    if tag not in label_names:
      raise GlueFormatError(f"{where}: unknown tag '{tag}'; expected one of "
                            f"{', '.join(label_names)}")
  elif tag != "O" and (len(tag) < 3 or tag[1] != "-" or tag[0] not in "BIES"):
    raise GlueFormatError(f"{where}: tag '{tag}' is neither O nor <B|I|E|S>-<type>")


def read_conll(path: str, label_names: Sequence[str] = (), require_labels: bool = False
               ) -> List[TaggingExample]:
  """Reads the sentences of one CoNLL file.

  Args:
    path: the file.
    label_names: the allowed tags; empty accepts any O / X-TYPE tag.
    require_labels: refuse a file whose token lines hold only the word.

  Returns:
    The sentences in file order, each with `tags` (None when the file has no tag
    column).

  Raises:
    GlueFormatError: naming the file and line of a malformed tag, a line whose
      column count differs from the file's first token line, or with `require_labels`
      the first token line when it holds no tag.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f"Data file not found: {path}")
  with tf.io.gfile.GFile(path, "rb") as f:
    lines = f.read().decode("utf-8-sig").split("\n")
  examples: List[TaggingExample] = []
  words: List[str] = []
  tags: List[str] = []
  num_columns = None

  def flush():
    if words:
      examples.append(TaggingExample(len(examples), list(words),
                                     list(tags) if num_columns > 1 else None))
      words.clear()
      tags.clear()

  for line_number, line in enumerate(lines, start=1):
    fields = line.split()
    if not fields:
      flush()
      continue
    if fields[0] == DOCSTART:
      flush()
      continue
    where = f"{path}:{line_number}"
    if num_columns is None:
      num_columns = len(fields)
      if require_labels and num_columns < 2:
        raise GlueFormatError(f"{where}: the token line holds no tag after the word; "
                              f"{readers.LABELS_NEEDED}")
    elif len(fields) != num_columns:
      raise GlueFormatError(f"{where}: expected {num_columns} columns like the first token "
                            f"line, found {len(fields)}")
    words.append(fields[0])
    if num_columns > 1:
      _check_tag(fields[-1], where, label_names)
      tags.append(fields[-1])
  flush()
  return examples


@readers.register_reader("conll")
def read_conll_files(data_config, options) -> List[TaggingExample]:
  """Every file of data_config.input_path, sentences numbered across the files, tags
  among options["label_names"]; a file without tags is refused."""
  return readers.read_numbered(
      data_config.input_path,
      lambda path: read_conll(path, options.get("label_names", ()), require_labels=True))
