"""Readers for the GLUE TSV files and for generic labelled TSV/CSV files.

Every reader returns SentenceExamples. Files are read the way the GLUE release
writes them: tab-separated, no quoting (quotes are part of the text), UTF-8 with an
optional byte-order mark. Labelled files (train, dev) and test files (no label, an
`index` column) of one task are told apart by their header.

A row with the wrong number of columns, an unknown label or a score out of range is a
GlueFormatError naming the file and line, except where the format is known to hold
such rows (QQP's train file), where they are skipped and counted.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import logging
from typing import Dict, List, Optional, Sequence, Tuple, Union

from bert_tf.data.task_files import readers
from bert_tf.utils import errors
from bert_tf.utils import files


class GlueFormatError(errors.UserError, ValueError):
  """A data file does not have the layout its task expects."""


@dataclasses.dataclass
class SentenceExample:
  """One sentence or sentence pair.

  Attributes:
    index: the row's index column (GLUE test files), else its 0-based row number.
    text_a: the first sentence.
    text_b: the second sentence, or None for single-sentence tasks.
    label: a class name, a float score (regression), or None in unlabelled files.
  """

  index: int
  text_a: str
  text_b: Optional[str]
  label: Union[str, float, None]


@dataclasses.dataclass(frozen=True)
class GlueTaskSpec:
  """The layout, labels and metric of one GLUE task.

  Columns are header names; `positional` gives (text_a, label) column numbers for
  labelled files without a header (CoLA).
  """

  text_a: str
  text_b: str
  label: str
  index: str
  label_names: Tuple[str, ...]
  metric: str
  score_range: Tuple[float, float] = ()
  positional: Tuple[int, int] = ()
  skip_malformed: bool = False

  @property
  def num_classes(self) -> int:
    return 1 if self.score_range else len(self.label_names)


GLUE_TASKS: Dict[str, GlueTaskSpec] = {
    "cola": GlueTaskSpec("sentence", "", "label", "index", ("0", "1"), "matthews_corrcoef",
                         positional=(3, 1)),
    "sst2": GlueTaskSpec("sentence", "", "label", "index", ("0", "1"), "accuracy"),
    "mrpc": GlueTaskSpec("#1 String", "#2 String", "Quality", "index", ("0", "1"),
                         "accuracy_f1"),
    "qqp": GlueTaskSpec("question1", "question2", "is_duplicate", "id", ("0", "1"),
                        "accuracy_f1", skip_malformed=True),
    "stsb": GlueTaskSpec("sentence1", "sentence2", "score", "index", (), "pearson_spearman",
                         score_range=(0.0, 5.0)),
    "mnli": GlueTaskSpec("sentence1", "sentence2", "gold_label", "index",
                         ("contradiction", "entailment", "neutral"), "accuracy"),
    "qnli": GlueTaskSpec("question", "sentence", "label", "index",
                         ("entailment", "not_entailment"), "accuracy"),
    "rte": GlueTaskSpec("sentence1", "sentence2", "label", "index",
                        ("entailment", "not_entailment"), "accuracy"),
    "wnli": GlueTaskSpec("sentence1", "sentence2", "label", "index", ("0", "1"), "accuracy"),
}
# MNLI matched and mismatched dev/test files share MNLI's layout.
GLUE_TASKS["mnli_matched"] = GLUE_TASKS["mnli"]
GLUE_TASKS["mnli_mismatched"] = GLUE_TASKS["mnli"]


def _read_lines(path: str) -> List[str]:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f"Data file not found: {path}")
  with tf.io.gfile.GFile(path, "rb") as f:
    data = f.read()
  try:
    text = data.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    raise GlueFormatError(f"{path}: not UTF-8 ({e})") from None
  # Only \n ends a row: GLUE sentences may hold other Unicode line separators.
  lines = text.split("\n")
  if lines and lines[-1] == "":
    lines.pop()
  return [line[:-1] if line.endswith("\r") else line for line in lines]


def _parse_label(spec_label_names: Sequence[str], score_range: Sequence[float], raw: str,
                 where: str) -> Union[str, float]:
  raw = raw.strip()
  if score_range:
    try:
      score = float(raw)
    except ValueError:
      raise GlueFormatError(f"{where}: score '{raw}' is not a number") from None
    low, high = score_range
    if not low <= score <= high:
      raise GlueFormatError(f"{where}: score {score} is outside [{low}, {high}]")
    return score
  if raw not in spec_label_names:
    raise GlueFormatError(f"{where}: unknown label '{raw}'; expected one of "
                          f"{', '.join(spec_label_names)}")
  return raw


def read_glue_tsv(path: str, task: str, require_labels: bool = False
                  ) -> List[SentenceExample]:
  """Reads one GLUE file (train, dev or test) of `task` (a key of GLUE_TASKS).

  Returns:
    The examples in file order; labels are None in test files.

  Raises:
    GlueFormatError: naming the file and line of a malformed row, or of a header
      without the task's label column with `require_labels`.
  """
  if task not in GLUE_TASKS:
    raise ValueError(f"Unknown GLUE task '{task}'; choose one of {', '.join(GLUE_TASKS)}")
  spec = GLUE_TASKS[task]
  lines = _read_lines(path)
  if not lines:
    return []
  header = lines[0].split("\t")
  if spec.positional and spec.text_a not in header:
    text_col, label_col = spec.positional
    return _read_rows(path, lines, 0, None, text_col, None, label_col, None, spec)
  columns = {name: i for i, name in enumerate(header)}
  if spec.text_a not in columns or (spec.text_b and spec.text_b not in columns):
    wanted = [c for c in (spec.text_a, spec.text_b) if c]
    raise GlueFormatError(f"{path}:1: header {header} lacks the {task} columns {wanted}")
  if require_labels and spec.label not in columns:
    raise GlueFormatError(f"{path}:1: header {header} has no {task} label column "
                          f"'{spec.label}'; {readers.LABELS_NEEDED}")
  return _read_rows(path, lines, 1, len(header), columns[spec.text_a],
                    columns.get(spec.text_b) if spec.text_b else None,
                    columns.get(spec.label), columns.get(spec.index), spec)


def _read_rows(path, lines, first, num_columns, text_a_col, text_b_col, label_col, index_col,
               spec: GlueTaskSpec) -> List[SentenceExample]:
  examples, skipped = [], 0
  needed = max(c for c in (text_a_col, text_b_col, label_col, index_col) if c is not None) + 1
  for line_number, line in enumerate(lines[first:], start=first + 1):
    where = f"{path}:{line_number}"
    fields = line.split("\t")
    bad_count = (len(fields) != num_columns) if num_columns else len(fields) < needed
    if bad_count:
      if spec.skip_malformed:
        skipped += 1
        continue
      raise GlueFormatError(f"{where}: expected {num_columns or needed} tab-separated columns, "
                            f"found {len(fields)}")
    label = None
    if label_col is not None:
      label = _parse_label(spec.label_names, spec.score_range, fields[label_col], where)
    index = len(examples)
    if index_col is not None:
      try:
        index = int(fields[index_col])
      except ValueError:
        raise GlueFormatError(f"{where}: index '{fields[index_col]}' is not an integer") from None
    examples.append(SentenceExample(index, fields[text_a_col],
                                    fields[text_b_col] if text_b_col is not None else None,
                                    label))
  if skipped:
    logging.warning("%s: skipped %d malformed rows", path, skipped)
  return examples


def read_labelled_table(path: str, text_a_column: str = "text", text_b_column: str = "",
                        label_column: str = "label", label_names: Sequence[str] = (),
                        score_range: Sequence[float] = (), index_column: str = "",
                        require_labels: bool = False) -> List[SentenceExample]:
  """Reads a generic TSV (.tsv, tab, no quoting) or CSV (.csv, quoted) file with a header.

  Args:
    path: the file; a name ending in .csv is read as CSV, anything else as TSV.
    text_a_column, text_b_column: header names of the text columns (text_b optional).
    label_column: header name of the label; a file without it is read unlabelled,
      or refused with `require_labels`.
    label_names: allowed class names (empty: any string is a class name).
    score_range: [low, high] to read the label as a float score instead.
    index_column: optional header name of an integer index.

  Raises:
    GlueFormatError: naming the file and line of a malformed row.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if path.endswith(".csv"):
    with tf.io.gfile.GFile(path, "rb") as f:
      text = f.read().decode("utf-8-sig")
    rows = list(csv.reader(io.StringIO(text, newline="")))
  else:
    rows = [line.split("\t") for line in _read_lines(path)]
  if not rows:
    return []
  header = rows[0]
  columns = {name: i for i, name in enumerate(header)}
  for name in (text_a_column, text_b_column, index_column):
    if name and name not in columns:
      raise GlueFormatError(f"{path}:1: header {header} has no column '{name}'")
  if require_labels and label_column not in columns:
    raise GlueFormatError(f"{path}:1: header {header} has no label column "
                          f"'{label_column}'; {readers.LABELS_NEEDED}")
  label_col = columns.get(label_column)
  examples = []
  for line_number, fields in enumerate(rows[1:], start=2):
    where = f"{path}:{line_number}"
    if len(fields) != len(header):
      raise GlueFormatError(f"{where}: expected {len(header)} columns, found {len(fields)}")
    label = None
    if label_col is not None:
      raw = fields[label_col].strip()
      if score_range or label_names:
        label = _parse_label(label_names, score_range, raw, where)
      else:
        label = raw
    index = len(examples)
    if index_column:
      try:
        index = int(fields[columns[index_column]])
      except ValueError:
        raise GlueFormatError(f"{where}: index '{fields[columns[index_column]]}' is not an "
                              "integer") from None
    examples.append(SentenceExample(
        index, fields[columns[text_a_column]],
        fields[columns[text_b_column]] if text_b_column else None, label))
  return examples


@readers.register_reader("tsv", "csv")
def read_sentence_files(data_config, options) -> List[SentenceExample]:
  """Every file of data_config.input_path as SentenceExamples: in options["glue_task"]'s
  layout when it is set, else a table with a header read by the column names of
  options (text_a_column, text_b_column, label_column, index_column) with labels among
  options["label_names"] or scores in options["score_range"]; a file without its label
  column is refused."""
  examples = []
  for path in files.expand_patterns(data_config.input_path):
    if options.get("glue_task"):
      examples.extend(read_glue_tsv(path, options["glue_task"], require_labels=True))
    else:
      examples.extend(read_labelled_table(
          path, options.get("text_a_column", "text"), options.get("text_b_column", ""),
          options.get("label_column", "label"), label_names=options.get("label_names", ()),
          score_range=options.get("score_range", ()),
          index_column=options.get("index_column", ""), require_labels=True))
  return examples
