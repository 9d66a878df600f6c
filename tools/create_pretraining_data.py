r"""Creates BERT pretraining TFRecords (masked LM + next sentence) from raw text.

Same semantics, flags and output features as the original google-research/bert
create_pretraining_data.py, so its files and ours feed either trainer. The flags take the
experiment configs' names (--seq_length, --lower_case, --whole_word_masking); the original
tool's names (--max_seq_length, --do_lower_case, --do_whole_word_mask) are accepted too. Input: text files
with one sentence per line and a blank line between documents. Output: sharded TFRecords
plus a JSON summary (instances, masking statistics, settings, vocab SHA-256) beside them.

  python3 tools/create_pretraining_data.py \
      --input_file=corpus/*.txt --vocab_file=vocab.txt --lower_case \
      --output=out/pretrain --num_shards=4 --num_workers=2 \
      --seq_length=128 --max_predictions_per_seq=20 --dupe_factor=10

writes out/pretrain-0000{0..3}-of-00004.tfrecord and out/pretrain.json. The input is
processed in document-aligned chunks (--chunk_size_mb); a random next segment comes from
another document of the same chunk. The same seed, input, settings, chunk size and shard
count give identical files with any number of workers.

With --runner set to an Apache Beam runner (DirectRunner, DataflowRunner, FlinkRunner,
SparkRunner, PortableRunner) the same work runs as a Beam pipeline and writes the same
files (`pip install "bert_tf[beam]"`); Beam's own pipeline options follow a `--`:

  python3 tools/create_pretraining_data.py --runner=DataflowRunner \
      --input_file=gs://b/corpus/*.txt --vocab_file=gs://b/vocab.txt \
      --output=gs://b/out/pretrain --num_shards=256 -- \
      --project=P --region=R --temp_location=gs://b/tmp --setup_file=./setup.py

`pip install .` installs this tool as the command `bert-tf-create-pretraining-data` (same flags).
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

from bert_tf.data.creation import create_pretraining_data as cpd
from bert_tf.data.records import pretraining_format
from bert_tf.utils import errors
from bert_tf.utils import optional

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None,
                    "Input text files: comma-separated globs. One sentence per line, a blank "
                    "line between documents.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocab (one token per line).")
flags.DEFINE_string("output", None,
                    "Output prefix: writes <output>-NNNNN-of-NNNNN.tfrecord[.gz] and "
                    "<output>.json. An output ending in .tfrecord names the single file.")
flags.DEFINE_bool("lower_case", True, "Lower-case and strip accents (uncased vocabs).")
flags.DEFINE_alias("do_lower_case", "lower_case")
flags.DEFINE_bool("whole_word_masking", False,
                  "Mask whole words (all WordPiece pieces of a word) instead of pieces.")
flags.DEFINE_alias("do_whole_word_mask", "whole_word_masking")
flags.DEFINE_integer("seq_length", 128, "Length of [CLS] A [SEP] B [SEP], padded.")
flags.DEFINE_alias("max_seq_length", "seq_length")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Most masked positions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Seed of every random draw.")
flags.DEFINE_integer("dupe_factor", 10, "Passes over the input, each with different masks.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Fraction of tokens to predict.")
flags.DEFINE_float("short_seq_prob", 0.1,
                   "Probability that a document pass aims at a random shorter length.")
flags.DEFINE_integer("num_shards", 1,
                     "Output files: chunk i's instances go to shard i mod num_shards, so "
                     "the files are the same for any --num_workers or --runner.")
flags.DEFINE_integer("num_workers", 1,
                     "Worker processes. Each writes its own shards, so at most num_shards "
                     "workers are used.")
flags.DEFINE_float("chunk_size_mb", 4.0,
                   "Input is read, tokenized and turned into instances in document-aligned "
                   "chunks of about this size; memory is bounded by one chunk per worker.")
flags.DEFINE_bool("gzip", False, "GZIP-compress the TFRecords (read with "
                  "compression_type=GZIP).")
flags.DEFINE_bool("overwrite", False, "Replace existing output files.")
flags.DEFINE_bool("progress", True, "Print a progress line with rate and ETA.")
flags.DEFINE_string("runner", "local",
                    "local: this machine's worker processes (--num_workers). Otherwise an "
                    "Apache Beam runner (DirectRunner, DataflowRunner, FlinkRunner, "
                    "SparkRunner, PortableRunner) run with Beam's pipeline options given "
                    "after `--`; needs `pip install \"bert_tf[beam]\"`.")


def _create(settings, beam_args):
  """Runs the local tool or, with --runner, the Beam pipeline."""
  if FLAGS.runner == "local":
    if beam_args:
      raise app.UsageError(f"Beam pipeline options ({' '.join(beam_args)}) need --runner")
    return cpd.create_pretraining_data(
        FLAGS.input_file, FLAGS.vocab_file, FLAGS.output, settings,
        num_shards=FLAGS.num_shards, num_workers=FLAGS.num_workers, gzip=FLAGS.gzip,
        overwrite=FLAGS.overwrite, chunk_size_mb=FLAGS.chunk_size_mb,
        progress=FLAGS.progress)
  try:
    from bert_tf.data.creation import beam_pretraining  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise pretraining_format.PretrainingDataError(
        f"--runner={FLAGS.runner} needs Apache Beam (pip install \"bert_tf[beam]\"): "
        f"{e}") from None
  return beam_pretraining.create_pretraining_data(
      FLAGS.input_file, FLAGS.vocab_file, FLAGS.output, settings,
      num_shards=FLAGS.num_shards, gzip=FLAGS.gzip, overwrite=FLAGS.overwrite,
      chunk_size_mb=FLAGS.chunk_size_mb, runner=FLAGS.runner, pipeline_args=beam_args)


def main(argv):
  for name in ("input_file", "vocab_file", "output"):
    if not getattr(FLAGS, name):
      raise app.UsageError(f"--{name} is required")
  settings = pretraining_format.PretrainingDataSettings(
      max_seq_length=FLAGS.seq_length,
      max_predictions_per_seq=FLAGS.max_predictions_per_seq,
      masked_lm_prob=FLAGS.masked_lm_prob, dupe_factor=FLAGS.dupe_factor,
      short_seq_prob=FLAGS.short_seq_prob, random_seed=FLAGS.random_seed,
      do_lower_case=FLAGS.lower_case, do_whole_word_mask=FLAGS.whole_word_masking)
  summary = _create(settings, argv[1:])
  fractions = summary["masked_outcome_fractions"]
  print(f"Wrote {summary['instances']:,} instances ({summary['tokens']:,} tokens) to "
        f"{len(summary['output_files'])} file(s) in {summary['seconds']:.1f} s "
        f"({summary['instances_per_second']:,.0f} instances/s"
        + (f", {summary['instances_per_second_after_startup']:,.0f} after "
           f"{summary['startup_seconds']:.1f} s of start-up" if FLAGS.runner == "local" else "")
        + f"); masked "
        f"{100 * summary['masked_fraction_of_non_special']:.2f}% of non-special tokens "
        f"({100 * fractions['mask']:.1f}/{100 * fractions['random']:.1f}/"
        f"{100 * fractions['kept']:.1f} mask/random/kept), random next "
        f"{100 * summary['next_sentence_random_fraction']:.1f}%, "
        f"{summary['invalid_utf8_replacements']} invalid UTF-8 replaced; summary: "
        f"{pretraining_format.summary_path(FLAGS.output)}")
  return 0


def run():
  """The `bert-tf-create-pretraining-data` command."""
  errors.run_tool("create_pretraining_data", main, needs=optional.tensorflow_for_tools)


if __name__ == "__main__":
  run()
