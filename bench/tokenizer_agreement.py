r"""Agreement and speed of BertWordPieceTokenizer against reference tokenizers.

For every sentence of the real corpora in --data_dir (GLUE SST-2/MRPC/CoLA/RTE/
STS-B, CoNLL-2003, WikiText-2 raw, SQuAD v1.1 questions and contexts) it
compares our ids with

* Hugging Face `tokenizers.BertWordPieceTokenizer` (the reference; words of
  more than 100 characters become [UNK], as in our default), and
* a direct Python transcription of the original google-research/bert rules
  (Python's `str.lower()` and `unicodedata`; words of more than 200 characters
  become [UNK], the original's limit, compared with ours built with
  `max_chars_per_word=200` as tools/create_pretraining_data.py builds it),
  the transcription the tests use (bench/reference_tokenizer.py),

for the uncased and the cased vocab. A second check sweeps every assigned code
point of Python's Unicode tables (and the BMP private-use area) in several
contexts through the word splitting of ours, of Hugging Face and of the
original rules, and sorts each disagreement into a class. It prints the
agreement, the classes, and tokens/s of our tokenizer (eager batches,
`tf.data`) and of the reference; writes bench/results/tokenizer_agreement.json
and regenerates its section of bench/README.md.

    python -m bench.tokenizer_agreement --data_dir=$BERT_TF_DATA
"""

import collections
import os
import statistics
import time
import unicodedata

from absl import app
from absl import flags

# common first: it chooses the CPU kernels before TensorFlow loads.
from bench import common
from bench import text_corpora
from bench.reference_tokenizer import original_ids, original_words
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top,wrong-import-position

from bert_tf.text.tokenizer import BertWordPieceTokenizer  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
common.define_data_dir_flag()
flags.DEFINE_integer("batch_size", 1024, "Sentences per batch for the speed runs.")
flags.DEFINE_integer("max_examples", 5, "Disagreeing sentences printed per setting.")
flags.DEFINE_integer("speed_sentences", 30000, "Sentences used for the speed runs.")
flags.DEFINE_integer("speed_rounds", 3, "Rounds of the speed runs (the median is reported).")
flags.DEFINE_bool("sweep", True, "Also sweep every code point through the word splitting.")
flags.DEFINE_bool("write_readme", True, "Regenerate this benchmark's README section.")


def ours_ids(tokenizer, sentences, batch_size):
  out = []
  for i in range(0, len(sentences), batch_size):
    out.extend(tokenizer.tokenize_pieces(tf.constant(sentences[i:i + batch_size])).to_list())
  return out


def agreement(name, tokenizers, hf, sentences, batch_size, max_examples):
  """Sentence-level agreement of ours with each reference on one corpus.

  Args:
    tokenizers: {max_chars_per_word: BertWordPieceTokenizer} for 100 and 200.

  Returns:
    {reference name: number of sentences with identical ids}.
  """
  tokenizer = tokenizers[100]
  vocab_index = {t: i for i, t in enumerate(tokenizer.vocab)}
  results = {}
  for ref_name, ours, ref_ids in (
      ("hf_tokenizers", ours_ids(tokenizer, sentences, batch_size),
       [e.ids for e in hf.encode_batch(sentences, add_special_tokens=False)]),
      ("original_rules", ours_ids(tokenizers[200], sentences, batch_size),
       [original_ids(s, tokenizer.lower_case, vocab_index, tokenizer.unk_id)
        for s in sentences])):
    bad = [k for k, (o, r) in enumerate(zip(ours, ref_ids)) if o != r]
    categories = collections.Counter()
    for k in bad:
      ours_tokens = [tokenizer.vocab[i] for i in ours[k]]
      ref_tokens = [tokenizer.vocab[i] for i in ref_ids[k]]
      differing = set("".join(set(ours_tokens) ^ set(ref_tokens)))
      suspects = {ch for ch in sentences[k] if ord(ch) > 127} or differing
      categories.update(f"U+{ord(ch):04X} {unicodedata.category(ch)}"
                        for ch in suspects)
    agree = len(sentences) - len(bad)
    results[ref_name] = agree
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


# Every code point's disagreements, sorted into classes. The order matters: the first
# matching class names a code point.
SWEEP_CLASSES = (
    ("private_use",
     lambda cp: unicodedata.category(chr(cp)) == "Co",
     "private-use characters (Co): Hugging Face removes them with the control "
     "characters; the original removes only Cc/Cf and keeps them"),
    ("cjk_ext_e_start",
     lambda cp: 0x2B820 <= cp <= 0x2B91F,
     "U+2B820-U+2B91F (start of CJK Extension E): the original pads them as CJK "
     "ideographs; Hugging Face's CJK range begins at U+2B920"),
    ("final_sigma",
     lambda cp: cp == 0x3A3,
     "capital sigma at the end of a word: Python's str.lower() (the original) "
     "gives final sigma, Hugging Face lower-cases it to medial sigma"),
    ("unicode_version",
     lambda cp: unicodedata.ucd_3_2_0.category(chr(cp)) != unicodedata.category(chr(cp)),
     f"characters added or re-categorized since Unicode 3.2: each library carries "
     f"its own Unicode tables (Python {unicodedata.unidata_version} here), which "
     f"disagree on recent characters"),
    ("other", lambda cp: True, "anything else"),
)


def sweep_code_points():
  """Assigned code points of Python's tables (surrogates left out) and the BMP PUA."""
  return [cp for cp in range(0x110000)
          if unicodedata.category(chr(cp)) not in ("Cn", "Cs") and cp < 0xF0000]


def character_sweep(lower_case, hf_normalizer, hf_pre_tokenizer, batch_size=20000):
  """Words of ours and of Hugging Face against the original rules, per code point.

  Each code point c is split in the text "a{c}b A{c} {c}Z x{c}{c}" (inside a word,
  at its end, at its start, doubled).

  Returns:
    {"ours": {class: [code points]}, "hf_tokenizers": {class: [code points]},
     "code_points": number swept}.
  """
  from bert_tf.text import normalization  # pylint: disable=g-import-not-at-top
  cps = sweep_code_points()
  texts = [f"a{chr(cp)}b A{chr(cp)} {chr(cp)}Z x{chr(cp)}{chr(cp)}" for cp in cps]
  ours = []
  for i in range(0, len(texts), batch_size):
    ours.extend([w.decode("utf-8") for w in row] for row in normalization.split_words(
        tf.constant(texts[i:i + batch_size]), lower_case).to_list())
  found = {"ours": collections.defaultdict(list),
           "hf_tokenizers": collections.defaultdict(list)}
  for cp, text, our_words in zip(cps, texts, ours):
    expected = original_words(text, lower_case)
    hf_words = [w for w, _ in hf_pre_tokenizer.pre_tokenize_str(
        hf_normalizer.normalize_str(text))]
    for name, words in (("ours", our_words), ("hf_tokenizers", hf_words)):
      if words != expected:
        label = next(c for c, test, _ in SWEEP_CLASSES if test(cp))
        found[name][label].append(cp)
  return {"ours": dict(found["ours"]), "hf_tokenizers": dict(found["hf_tokenizers"]),
          "code_points": len(cps)}


def _time_dataset(dataset):
  for _ in dataset.take(1):
    pass
  start = time.perf_counter()
  for _ in dataset:
    pass
  return time.perf_counter() - start


def speed(tokenizer, fast_tokenizer, hf, sentences, batch_size, rounds):
  """Seconds per path over the same sentences, every path once per round.

  The order reverses every other round so that the paths share the moments of a
  shared machine; each path is warmed up on one batch first.

  Returns:
    (number of tokens, {path: [seconds per round]}).
  """
  num_tokens = sum(len(e.ids) for e in hf.encode_batch(sentences, add_special_tokens=False))
  batches = tf.data.Dataset.from_tensor_slices(sentences).batch(batch_size)

  def dataset_path(fn):
    return lambda: _time_dataset(batches.map(fn, num_parallel_calls=tf.data.AUTOTUNE)
                                 .prefetch(tf.data.AUTOTUNE))

  def eager():
    start = time.perf_counter()
    ours_ids(tokenizer, sentences, batch_size)
    return time.perf_counter() - start

  def hf_batches():
    start = time.perf_counter()
    for i in range(0, len(sentences), batch_size):
      hf.encode_batch(sentences[i:i + batch_size], add_special_tokens=False)
    return time.perf_counter() - start

  paths = {
      "ours eager batches": eager,
      "ours tf.data": dataset_path(tokenizer.tokenize_pieces),
      "ours tf.data, fast=True": dataset_path(fast_tokenizer.tokenize_pieces),
      "ours tf.data with offsets": dataset_path(tokenizer.tokenize_with_offsets),
      "hf tokenizers encode_batch": hf_batches,
  }
  ours_ids(tokenizer, sentences[:batch_size], batch_size)
  ours_ids(fast_tokenizer, sentences[:batch_size], batch_size)
  hf.encode_batch(sentences[:batch_size])
  times = {name: [] for name in paths}
  for r in range(rounds):
    order = list(paths) if r % 2 == 0 else list(reversed(paths))
    for name in order:
      times[name].append(paths[name]())
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


def long_words(sentences, lower_case):
  """Words of 101-200 characters: where the 100 and the 200 character limits differ."""
  return sum(100 < len(w) <= 200 for text in sentences
             for w in original_words(text, lower_case))


def _pct(agree, total):
  return f"{100.0 * agree / max(total, 1):.3f}%"


def _markdown(payload):
  settings = list(payload["settings"])
  header = ["corpus", "sentences", "with non-ASCII"]
  for setting in settings:
    header += [f"{setting}: = Hugging Face", f"{setting}: = original rules"]
  rows = []
  for corpus, info in payload["corpora"].items():
    row = [corpus, f"{info['sentences']:,}", f"{info['non_ascii']:,}"]
    for setting in settings:
      agree = payload["settings"][setting]["agreement"][corpus]
      row += [_pct(agree["hf_tokenizers"], info["sentences"]),
              _pct(agree["original_rules"], info["sentences"])]
    rows.append(row)
  total = payload["total_sentences"]
  row = ["all", f"{total:,}", f"{sum(c['non_ascii'] for c in payload['corpora'].values()):,}"]
  for setting in settings:
    totals = payload["settings"][setting]["totals"]
    row += [f"{_pct(totals['hf_tokenizers'], total)} ({total - totals['hf_tokenizers']} differ)",
            f"{_pct(totals['original_rules'], total)} "
            f"({total - totals['original_rules']} differ)"]
  rows.append(row)
  lines = [f"`{payload['command']}`", "",
           f"{payload['machine']}. Sentence-level agreement: a sentence agrees when "
           f"all its WordPiece ids are equal. Hugging Face `tokenizers` "
           f"{payload['hf_version']} `BertWordPieceTokenizer` (clean_text, "
           f"handle_chinese_chars, lowercase and strip_accents as the vocab), words over "
           f"100 characters -> [UNK] in both; the original rules "
           f"(bench/reference_tokenizer.py) with their 200-character limit against ours "
           f"built with `max_chars_per_word=200`.", "",
           common.markdown_table(header, rows), ""]
  for setting in settings:
    info = payload["settings"][setting]
    lines.append(
        f"- {setting}: `fast=True` gives the same ids as `fast=False` on "
        f"{info['fast_identical']:,}/{total:,} sentences; tensorflow-text's own "
        f"`BertTokenizer(lower_case={setting == 'uncased'})` agrees with Hugging Face on "
        f"{_pct(info['tf_text_bert_agree'], total)} ({total - info['tf_text_bert_agree']} "
        f"sentences differ), the reason for our in-graph normalization; words of 101-200 "
        f"characters (where the two limits differ): {info['long_words']}.")
  sweep = payload.get("sweep")
  if sweep:
    lines += ["", f"Every code point ({sweep['code_points']:,}: assigned in Python's "
              f"Unicode {sweep['unicode_version']} tables, plus the BMP private-use area), "
              f"each inside, at the end and at the start of a word and doubled: code points "
              f"whose words differ from the original rules, by class.", ""]
    rows = []
    seen = set()
    for setting in settings:
      for ref in ("ours", "hf_tokenizers"):
        classes = sweep[setting][ref]
        if not classes:
          rows.append([setting, ref, "(none)", 0, ""])
        for label, info in sorted(classes.items(), key=lambda kv: -kv[1]["count"]):
          seen.add(label)
          rows.append([setting, ref, f"`{label}`", f"{info['count']:,}",
                       " ".join(info["examples"][:4])])
    lines.append(common.markdown_table(
        ["setting", "tokenizer", "class", "code points", "examples"], rows))
    lines.append("")
    lines += [f"- `{label}`: {description}." for label, _, description in SWEEP_CLASSES
              if label in seen]
  first = payload["settings"][settings[0]]["speed"]
  loads = ", ".join(f"{payload['settings'][s]['speed']['load_average']:.1f}" for s in settings)
  lines += ["", f"Speed on the first {first['sentences']:,} sentences of the corpora, "
            f"batches of {payload['batch_size']}, every path once per round in "
            f"alternating order, median of {len(next(iter(first['seconds'].values())))} "
            f"rounds (eager batches run one op at a time; tf.data and Hugging Face's "
            f"`encode_batch` may use both cores). The machine was shared (load average "
            f"{loads} "
            f"at the end of each setting's rounds): read the ratios.", ""]
  rows = []
  for setting in settings:
    sp = payload["settings"][setting]["speed"]
    for path, tokens_per_s in sp["tokens_per_second"].items():
      rows.append([setting, path, f"{tokens_per_s:,.0f}", f"{sp['speed_vs_hf'][path]:.2f}x"])
  lines.append(common.markdown_table(["setting", "path", "tokens/s", "vs Hugging Face"],
                                     rows))
  return "\n".join(lines)


def main(argv):
  del argv
  import tokenizers  # pylint: disable=g-import-not-at-top
  # pylint: disable=g-import-not-at-top
  from tokenizers import BertWordPieceTokenizer as HfBertWordPieceTokenizer
  from tokenizers import normalizers, pre_tokenizers

  corpora = text_corpora.load_corpora(FLAGS.data_dir)
  print(f"sentences: { {k: len(v) for k, v in corpora.items()} }")
  all_sentences = [s for v in corpora.values() for s in v]
  total = len(all_sentences)
  payload = {
      "command": common.command_line(),
      "machine": common.machine_description(),
      "hf_version": tokenizers.__version__,
      "batch_size": FLAGS.batch_size,
      "corpora": {name: {"sentences": len(v), "non_ascii": sum(not s.isascii() for s in v)}
                  for name, v in corpora.items()},
      "total_sentences": total,
      "settings": {},
  }
  if FLAGS.sweep:
    payload["sweep"] = {"code_points": len(sweep_code_points()),
                        "unicode_version": unicodedata.unidata_version}
  for setting, lower_case in (("uncased", True), ("cased", False)):
    vocab_file = os.path.join(FLAGS.data_dir, "bert_vocab", setting, "vocab.txt")
    tokenizers_by_limit = {
        limit: BertWordPieceTokenizer(vocab_file, lower_case=lower_case,
                                      max_chars_per_word=limit) for limit in (100, 200)}
    tokenizer = tokenizers_by_limit[100]
    fast_tokenizer = BertWordPieceTokenizer(vocab_file, lower_case=lower_case,
                                            fast=True)
    hf = HfBertWordPieceTokenizer(
        vocab_file, lowercase=lower_case, strip_accents=lower_case,
        clean_text=True, handle_chinese_chars=True, wordpieces_prefix="##")
    print(f"== {setting} ({vocab_file})")
    result = {"agreement": {}, "totals": collections.Counter()}
    for name, sentences in corpora.items():
      agree = agreement(name, tokenizers_by_limit, hf, sentences, FLAGS.batch_size,
                        FLAGS.max_examples)
      result["agreement"][name] = agree
      result["totals"].update(agree)
    result["totals"] = dict(result["totals"])
    for ref_name in ("hf_tokenizers", "original_rules"):
      agree = result["totals"][ref_name]
      print(f"  ALL         vs {ref_name:14s}: {agree}/{total} = "
            f"{100.0 * agree / total:.4f}%")
    result["fast_identical"] = sum(a == b for a, b in zip(
        ours_ids(tokenizer, all_sentences, FLAGS.batch_size),
        ours_ids(fast_tokenizer, all_sentences, FLAGS.batch_size)))
    print(f"  ALL fast=True vs fast=False: {result['fast_identical']}/{total} identical")
    result["long_words"] = long_words(all_sentences, lower_case)
    print(f"  words of 101-200 characters: {result['long_words']}")
    result["tf_text_bert_agree"] = tf_text_bert_agreement(
        vocab_file, lower_case, hf, all_sentences, FLAGS.batch_size)
    print(f"  (tensorflow-text BertTokenizer(lower_case={lower_case}) vs "
          f"hf_tokenizers: {result['tf_text_bert_agree']}/{total} = "
          f"{100.0 * result['tf_text_bert_agree'] / total:.4f}%)")
    if FLAGS.sweep:
      normalizer = normalizers.BertNormalizer(
          clean_text=True, handle_chinese_chars=True, strip_accents=lower_case,
          lowercase=lower_case)
      found = character_sweep(lower_case, normalizer, pre_tokenizers.BertPreTokenizer())
      payload["sweep"][setting] = {
          ref: {label: {"count": len(cps), "examples": [f"U+{cp:04X}" for cp in cps[:12]]}
                for label, cps in found[ref].items()}
          for ref in ("ours", "hf_tokenizers")}
      for ref in ("ours", "hf_tokenizers"):
        print(f"  every code point, {ref} vs original rules: "
              f"{sum(map(len, found[ref].values()))} of {found['code_points']} differ")
        for label, cps in sorted(found[ref].items(), key=lambda kv: -len(kv[1])):
          print(f"      {label}: {len(cps)} "
                f"({', '.join(f'U+{cp:04X} {unicodedata.category(chr(cp))}' for cp in cps[:6])})")
    subset = all_sentences[:FLAGS.speed_sentences]
    num_tokens, times = speed(tokenizer, fast_tokenizer, hf, subset, FLAGS.batch_size,
                              FLAGS.speed_rounds)
    medians = {p: statistics.median(t) for p, t in times.items()}
    hf_median = medians["hf tokenizers encode_batch"]
    result["speed"] = {"sentences": len(subset), "tokens": num_tokens,
                       "seconds": times, "load_average": os.getloadavg()[0],
                       "tokens_per_second": {p: num_tokens / t for p, t in medians.items()},
                       "speed_vs_hf": {p: hf_median / t for p, t in medians.items()}}
    for path, seconds in medians.items():
      print(f"  speed {path:28s}: {num_tokens / seconds:12,.0f} tokens/s, "
            f"{hf_median / seconds:.2f}x hf (median of {len(times[path])} rounds; "
            f"{len(subset)} sentences, {num_tokens} tokens, {seconds:.2f}s)")
    payload["settings"][setting] = result
  print(f"results: {common.write_results('tokenizer_agreement', payload)}")
  if FLAGS.write_readme:
    common.update_readme_section("tokenizer_agreement", _markdown(payload))
  print(f"command: {payload['command']}")


if __name__ == "__main__":
  app.run(main)
