r"""Agreement and speed of BertWordPieceTokenizer against reference tokenizers.

For every sentence of the real corpora in --data_dir (GLUE SST-2/MRPC/CoLA/RTE/
STS-B, CoNLL-2003, WikiText-2 raw, SQuAD v1.1 questions and contexts) it
compares our ids with

* Hugging Face `tokenizers.BertWordPieceTokenizer` (the reference), and
* a direct Python transcription of the original google-research/bert rules
  (Python's `str.lower()` and `unicodedata`), written here from its
  description,

for the uncased and the cased vocab, and prints the sentence-level agreement,
the disagreeing characters grouped by Unicode category, and tokens/s of our
tokenizer (eager batches, `tf.data`) and of the reference.

    python bench/tokenizer_agreement.py --data_dir=/work/shared/data
"""

import collections
import csv
import json
import os
import sys
import time
import unicodedata

from absl import app
from absl import flags
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.text.tokenizer import BertWordPieceTokenizer

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "Folder of the real-data kit (see its README).")
flags.DEFINE_integer("batch_size", 1024, "Sentences per batch for the speed runs.")
flags.DEFINE_integer("max_examples", 5, "Disagreeing sentences printed per setting.")
flags.DEFINE_integer("speed_sentences", 30000, "Sentences used for the speed runs.")
flags.mark_flag_as_required("data_dir")


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


# The original google-research/bert rules, transcribed from their description.

_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
               (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF),
               (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_bert_punctuation(ch):
  cp = ord(ch)
  if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
    return True
  return unicodedata.category(ch).startswith("P")


def original_words(text, lower_case):
  """Words of the original BasicTokenizer, for Python str input."""
  spaced = []
  for ch in text:
    category = unicodedata.category(ch)
    if ch in "\x00\ufffd" or (ch not in "\t\n\r" and category in ("Cc", "Cf")):
      continue
    if ch in " \t\n\r" or category == "Zs":
      spaced.append(" ")
    elif any(lo <= ord(ch) <= hi for lo, hi in _CJK_RANGES):
      spaced.append(f" {ch} ")
    else:
      spaced.append(ch)
  words = []
  for token in "".join(spaced).split():
    if lower_case:
      token = "".join(c for c in unicodedata.normalize("NFD", token.lower())
                      if unicodedata.category(c) != "Mn")
    current = ""
    for ch in token:
      if _is_bert_punctuation(ch):
        if current:
          words.append(current)
        words.append(ch)
        current = ""
      else:
        current += ch
    if current:
      words.append(current)
  return words


def original_wordpiece(word, index, unk_id, max_chars):
  if len(word) > max_chars:
    return [unk_id]
  pieces, start = [], 0
  while start < len(word):
    end = len(word)
    while end > start:
      piece = word[start:end] if start == 0 else "##" + word[start:end]
      if piece in index:
        pieces.append(index[piece])
        break
      end -= 1
    if end == start:
      return [unk_id]
    start = end
  return pieces


def original_ids(text, lower_case, index, unk_id, max_chars=100):
  return [i for w in original_words(text, lower_case)
          for i in original_wordpiece(w, index, unk_id, max_chars)]


def ours_ids(tokenizer, sentences, batch_size):
  out = []
  for i in range(0, len(sentences), batch_size):
    out.extend(tokenizer.tokenize_pieces(tf.constant(sentences[i:i + batch_size])).to_list())
  return out


def agreement(name, tokenizer, hf, sentences, batch_size, max_examples):
  vocab_index = {t: i for i, t in enumerate(tokenizer.vocab)}
  ours = ours_ids(tokenizer, sentences, batch_size)
  ref = [e.ids for e in hf.encode_batch(sentences, add_special_tokens=False)]
  results = {}
  for ref_name, ref_ids in (
      ("hf_tokenizers", ref),
      ("original_rules", [original_ids(s, tokenizer.lower_case, vocab_index,
                                       tokenizer.unk_id) for s in sentences])):
    bad = [k for k, (o, r) in enumerate(zip(ours, ref_ids)) if o != r]
    categories = collections.Counter()
    for k in bad:
      ours_tokens = [tokenizer.vocab[i] for i in ours[k]]
      ref_tokens = [tokenizer.vocab[i] for i in ref_ids[k]]
      differing = set("".join(set(ours_tokens) ^ set(ref_tokens)))
      suspects = {ch for ch in sentences[k] if ord(ch) > 127} or differing
      categories.update(f"U+{ord(ch):04X} {unicodedata.category(ch)}"
                        for ch in suspects)
    results[ref_name] = (len(sentences) - len(bad), bad, categories)
    agree = len(sentences) - len(bad)
    print(f"  {name:11s} vs {ref_name:14s}: {agree}/{len(sentences)} = "
          f"{100.0 * agree / max(len(sentences), 1):.4f}% sentences agree")
    for k in bad[:max_examples]:
      print(f"      differs: {sentences[k][:160]!r}")
      print(f"        ours: {[tokenizer.vocab[i] for i in ours[k]][:40]}")
      print(f"        ref : {[tokenizer.vocab[i] for i in ref_ids[k]][:40]}")
    if categories:
      print(f"      non-ASCII chars in disagreeing sentences: "
            f"{categories.most_common(15)}")
  return results


def _time_dataset(dataset):
  for _ in dataset.take(1):
    pass
  start = time.perf_counter()
  for _ in dataset:
    pass
  return time.perf_counter() - start


def speed(tokenizer, fast_tokenizer, hf, sentences, batch_size):
  """Seconds per path over the same sentences, after a warm-up batch each."""
  num_tokens = sum(len(e.ids) for e in hf.encode_batch(sentences, add_special_tokens=False))
  times = {}
  ours_ids(tokenizer, sentences[:batch_size], batch_size)
  start = time.perf_counter()
  ours_ids(tokenizer, sentences, batch_size)
  times["ours eager batches"] = time.perf_counter() - start

  batches = tf.data.Dataset.from_tensor_slices(sentences).batch(batch_size)
  for name, fn in (
      ("ours tf.data", tokenizer.tokenize_pieces),
      ("ours tf.data, fast=True", fast_tokenizer.tokenize_pieces),
      ("ours tf.data with offsets", tokenizer.tokenize_with_offsets)):
    times[name] = _time_dataset(
        batches.map(fn, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE))

  hf.encode_batch(sentences[:batch_size])
  start = time.perf_counter()
  for i in range(0, len(sentences), batch_size):
    hf.encode_batch(sentences[i:i + batch_size], add_special_tokens=False)
  times["hf tokenizers encode_batch"] = time.perf_counter() - start
  return num_tokens, times


def tf_text_bert_agreement(vocab_file, lower_case, hf, sentences, batch_size):
  """Sentences on which tensorflow-text's own BertTokenizer matches hf."""
  tokenizer = tf_text.BertTokenizer(vocab_file, lower_case=lower_case,
                                    token_out_type=tf.int64)
  ref = [e.ids for e in hf.encode_batch(sentences, add_special_tokens=False)]
  agree = 0
  for i in range(0, len(sentences), batch_size):
    ids = tokenizer.tokenize(tf.constant(sentences[i:i + batch_size]))
    agree += sum(o == r for o, r in zip(
        ids.merge_dims(1, 2).to_list(), ref[i:i + batch_size]))
  return agree


def main(argv):
  del argv
  from tokenizers import BertWordPieceTokenizer as HfBertWordPieceTokenizer

  corpora = load_corpora(FLAGS.data_dir)
  print(f"sentences: { {k: len(v) for k, v in corpora.items()} }")
  all_sentences = [s for v in corpora.values() for s in v]
  for setting, lower_case in (("uncased", True), ("cased", False)):
    vocab_file = os.path.join(FLAGS.data_dir, "bert_vocab", setting, "vocab.txt")
    tokenizer = BertWordPieceTokenizer(vocab_file, lower_case=lower_case)
    fast_tokenizer = BertWordPieceTokenizer(vocab_file, lower_case=lower_case,
                                            fast=True)
    hf = HfBertWordPieceTokenizer(
        vocab_file, lowercase=lower_case, strip_accents=lower_case,
        clean_text=True, handle_chinese_chars=True, wordpieces_prefix="##")
    print(f"== {setting} ({vocab_file})")
    totals = collections.Counter()
    for name, sentences in corpora.items():
      for ref_name, (agree, _, _) in agreement(
          name, tokenizer, hf, sentences, FLAGS.batch_size,
          FLAGS.max_examples).items():
        totals[ref_name, "agree"] += agree
        totals[ref_name, "total"] += len(sentences)
    total = len(all_sentences)
    for ref_name in ("hf_tokenizers", "original_rules"):
      agree = totals[ref_name, "agree"]
      print(f"  ALL         vs {ref_name:14s}: {agree}/{total} = "
            f"{100.0 * agree / total:.4f}%")
    same = sum(a == b for a, b in zip(
        ours_ids(tokenizer, all_sentences, FLAGS.batch_size),
        ours_ids(fast_tokenizer, all_sentences, FLAGS.batch_size)))
    print(f"  ALL fast=True vs fast=False: {same}/{total} identical")
    agree = tf_text_bert_agreement(vocab_file, lower_case, hf, all_sentences,
                                   FLAGS.batch_size)
    print(f"  (tensorflow-text BertTokenizer(lower_case={lower_case}) vs "
          f"hf_tokenizers: {agree}/{total} = {100.0 * agree / total:.4f}%)")
    subset = all_sentences[:FLAGS.speed_sentences]
    num_tokens, times = speed(tokenizer, fast_tokenizer, hf, subset,
                              FLAGS.batch_size)
    for path, seconds in times.items():
      print(f"  speed {path:28s}: {num_tokens / seconds:12,.0f} tokens/s "
            f"({len(subset)} sentences, {num_tokens} tokens, {seconds:.2f}s)")
  print(f"command: python bench/tokenizer_agreement.py --data_dir={FLAGS.data_dir}")


if __name__ == "__main__":
  app.run(main)
