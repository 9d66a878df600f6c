"""A stdlib reader of the GLUE SST-2 and MRPC training TSVs, for the peers' workers."""

import csv


def read(path, task):
  """Returns (texts_a, texts_b or None, labels) of a GLUE train.tsv."""
  with open(path, encoding="utf-8-sig") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
  rows = rows[1:]
  if task == "sst2":
    return [r[0] for r in rows], None, [int(r[1]) for r in rows]
  if task == "mrpc":
    return [r[3] for r in rows], [r[4] for r in rows], [int(r[0]) for r in rows]
  raise ValueError(f"task must be sst2 or mrpc, got '{task}'")
