r"""Learns a BERT WordPiece vocab from raw text files.

Each line of the input is normalized and split into words exactly as
BertWordPieceTokenizer does (uncased: lower-case and strip accents; cased:
neither), then tensorflow-text's WordPiece learner builds a vocab of about
--vocab_size tokens, with [PAD] [UNK] [CLS] [SEP] [MASK] as ids 0-4. Progress
(MiB read, rate, ETA) is printed every --progress_seconds while reading.

  python3 tools/build_vocab.py --input='corpus/*.txt' --output=vocab.txt \
      --vocab_size=30522 --lower_case

On a small corpus, fewer pieces occur --min_count times (default 10) than
--vocab_size asks for: the tool then says how many it learned, and a lower
--min_count gets closer:

  python3 tools/build_vocab.py --input='corpus/*.txt' --output=vocab.txt \
      --vocab_size=8000 --min_count=2

The vocab is written to a temporary name and renamed when complete.

`pip install .` installs this tool as the command `bert-tf-build-vocab` (same flags).
"""

import sys

from absl import app
from absl import flags

from bert_tf import cpu_kernels

# Before TensorFlow loads: it reads its CPU kernels, device kinds and log level once,
# when imported.
cpu_kernels.prefer_onednn()
cpu_kernels.leave_out_absent_gpus()
cpu_kernels.quiet_startup_logs()

from bert_tf.utils import errors
from bert_tf.utils import optional

FLAGS = flags.FLAGS
flags.DEFINE_multi_string(
    "input", None,
    "Input text files: a glob, or a comma-separated list of globs; repeatable.")
flags.DEFINE_string("output", None, "Vocab file to write, one token per line.")
flags.DEFINE_integer("vocab_size", 30522,
                     "Target vocab size including the 5 reserved tokens; the "
                     "result is at most this and usually within 5% of it.")
flags.DEFINE_bool("lower_case", True,
                  "Uncased vocab (lower-case and strip accents); "
                  "--nolower_case for a cased one.")
flags.DEFINE_integer(
    "min_count", None,
    "The fewest occurrences that make a piece a token (default: tensorflow-text's "
    "learner's, 10). A corpus too small for --vocab_size learns fewer tokens (the tool "
    "says so); a lower --min_count (down to 1) gets closer, with rarer pieces.")
flags.DEFINE_bool("overwrite", False, "Replace an existing --output.")
flags.DEFINE_float("progress_seconds", 10.0,
                   "Seconds between progress lines; 0 for every batch.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  for name in ("input", "output"):
    if not getattr(FLAGS, name):
      raise app.UsageError(f"--{name} is required")
  from bert_tf.text import vocab_learning  # pylint: disable=g-import-not-at-top
  vocab_learning.build_vocab(
      FLAGS.input, vocab_size=FLAGS.vocab_size, lower_case=FLAGS.lower_case,
      output_file=FLAGS.output, overwrite=FLAGS.overwrite,
      progress_interval=FLAGS.progress_seconds, min_count=FLAGS.min_count,
      stream=sys.stdout)
  return 0


def run():
  """The `bert-tf-build-vocab` command."""
  errors.run_tool("build_vocab", main, needs=optional.tensorflow_for_tools)


if __name__ == "__main__":
  run()
