"""The sentences of the public corpora under --data_dir that the tokenizer benchmark
reads (bench/tokenizer_agreement.py): GLUE SST-2, MRPC, CoLA, RTE and STS-B, CoNLL-2003,
WikiText-2 raw, SQuAD v1.1 questions and contexts, each as its files hold the text."""

import csv
import json
import sys


def _tsv_columns(path, columns, skip_header=True):
  with open(path, encoding="utf-8-sig", newline="") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
  if skip_header:
    rows = rows[1:]
  return [row[c] for row in rows for c in columns if len(row) > c]


def _conll_sentences(path):
  sentences, words = [], []
  with open(path, encoding="utf-8") as f:
    for line in f:
      parts = line.split()
      if not parts or parts[0] == "-DOCSTART-":
        if words:
          sentences.append(" ".join(words))
        words = []
      else:
        words.append(parts[0])
  if words:
    sentences.append(" ".join(words))
  return sentences


def _lines(path):
  with open(path, encoding="utf-8", newline="") as f:
    return [line for line in f.read().split("\n") if line.strip()]


def _squad(path):
  with open(path, encoding="utf-8") as f:
    data = json.load(f)["data"]
  texts = []
  for article in data:
    for paragraph in article["paragraphs"]:
      texts.append(paragraph["context"])
      texts.extend(qa["question"] for qa in paragraph["qas"])
  return texts


def load_corpora(data_dir):
  """Returns {name: [sentence, ...]} for the corpora found in data_dir."""
  readers = {
      "sst2": lambda: _tsv_columns(f"{data_dir}/glue_sst2/train.tsv", [0])
      + _tsv_columns(f"{data_dir}/glue_sst2/dev.tsv", [0]),
      "mrpc": lambda: _tsv_columns(f"{data_dir}/glue_mrpc/train.tsv", [3, 4])
      + _tsv_columns(f"{data_dir}/glue_mrpc/dev.tsv", [3, 4]),
      "cola": lambda: _tsv_columns(f"{data_dir}/glue_cola/train.tsv", [3], False),
      "rte": lambda: _tsv_columns(f"{data_dir}/glue_rte/train.tsv", [1, 2]),
      "stsb": lambda: _tsv_columns(f"{data_dir}/glue_stsb/train.tsv", [7, 8]),
      "conll2003": lambda: _conll_sentences(f"{data_dir}/conll2003/eng.train")
      + _conll_sentences(f"{data_dir}/conll2003/eng.testa"),
      "wikitext2": lambda: _lines(f"{data_dir}/wikitext2_raw/wiki.valid.raw")
      + _lines(f"{data_dir}/wikitext2_raw/wiki.test.raw"),
      "squad_v1.1": lambda: _squad(f"{data_dir}/squad_v1.1/dev-v1.1.json"),
  }
  corpora = {}
  for name, read in readers.items():
    try:
      corpora[name] = read()
    except FileNotFoundError as e:
      print(f"skipping {name}: {e}", file=sys.stderr)
  return corpora
