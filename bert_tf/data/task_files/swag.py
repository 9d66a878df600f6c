"""Reader for SWAG multiple-choice CSV files.

Columns (by header name): video-id, fold-ind, startphrase, sent1, sent2, gold-source,
ending0..ending3 and, except in the test file, label. As in the BERT paper, the
context is sent1 and choice i is sent2 + " " + ending_i.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from typing import List, Optional

from bert_tf.data.task_files import readers
from bert_tf.data.task_files.glue import GlueFormatError

NUM_SWAG_CHOICES = 4


@dataclasses.dataclass
class MultipleChoiceExample:
  """One question: a context, its candidate continuations and the right one."""

  index: int
  context: str
  endings: List[str]
  label: Optional[int]


def read_swag(path: str, num_choices: int = NUM_SWAG_CHOICES, require_labels: bool = False
              ) -> List[MultipleChoiceExample]:
  """Reads a SWAG CSV file (train.csv, val.csv or test.csv).

  Returns:
    The examples in file order; `label` is None when the file has no label column.

  Raises:
    GlueFormatError: naming the file and line of a missing column (the label column
      too with `require_labels`), a row of the wrong width or a label that is not one
      of 0..num_choices-1.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f"Data file not found: {path}")
  with tf.io.gfile.GFile(path, "rb") as f:
    text = f.read().decode("utf-8-sig")
  reader = csv.reader(io.StringIO(text, newline=""))
  try:
    header = next(reader)
  except StopIteration:
    return []
  columns = {name: i for i, name in enumerate(header)}
  needed = ["sent1", "sent2"] + [f"ending{i}" for i in range(num_choices)]
  missing = [name for name in needed if name not in columns]
  if missing:
    raise GlueFormatError(f"{path}:1: header lacks the SWAG columns {missing}")
  if require_labels and "label" not in columns:
    raise GlueFormatError(f"{path}:1: header lacks the SWAG label column 'label'; "
                          f"{readers.LABELS_NEEDED}")
  label_col = columns.get("label")
  examples = []
  for fields in reader:
    line = reader.line_num
    if not fields:
      continue
    if len(fields) != len(header):
      raise GlueFormatError(f"{path}:{line}: expected {len(header)} columns, found "
                            f"{len(fields)}")
    label = None
    if label_col is not None:
      raw = fields[label_col].strip()
      if raw not in {str(i) for i in range(num_choices)}:
        raise GlueFormatError(f"{path}:{line}: label '{raw}' is not one of "
                              f"0..{num_choices - 1}")
      label = int(raw)
    start = fields[columns["sent2"]]
    endings = [f"{start} {fields[columns[f'ending{i}']]}".strip() for i in range(num_choices)]
    examples.append(MultipleChoiceExample(len(examples), fields[columns["sent1"]], endings,
                                          label))
  return examples


@readers.register_reader("swag_csv")
def read_swag_files(data_config, options) -> List[MultipleChoiceExample]:
  """Every file of data_config.input_path, examples numbered across the files, with
  options["num_choices"] endings each; a file without labels is refused."""
  num_choices = options.get("num_choices", NUM_SWAG_CHOICES)
  return readers.read_numbered(data_config.input_path,
                               lambda path: read_swag(path, num_choices, require_labels=True))
