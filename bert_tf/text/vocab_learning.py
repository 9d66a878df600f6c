"""Learning a WordPiece vocab from text files with tensorflow-text's WordPiece learner,
on words split with the same normalization as `BertWordPieceTokenizer` (the
vocab file itself is written by bert_tf.text.vocab)."""

import sys
import time

import tensorflow as tf

from bert_tf import constants
from bert_tf.text import normalization
from bert_tf.text import vocab as vocab_lib
from bert_tf.utils import errors
from bert_tf.utils import files as files_lib
from bert_tf.utils import progress as progress_lib

# tensorflow-text's WordPiece learner: its default lower bound on a piece's count
# (`lower_thresh`), and how far below vocab_size it accepts a vocab (`slack_ratio`).
LEARNER_MIN_COUNT = 10
LEARNER_SLACK = 0.05


def _line_batches(files, batch_size, progress):
  """Yields lists of raw lines (bytes) from `files`, updating `progress`."""
  batch = []
  for path in files:
    with tf.io.gfile.GFile(path, "rb") as f:
      for line in f:
        batch.append(line)
        progress.update(len(line), lines=1)
        if len(batch) == batch_size:
          yield batch
          batch = []
  if batch:
    yield batch


def build_vocab(input_patterns, vocab_size, lower_case, output_file=None,
                overwrite=False, reserved_tokens=constants.SPECIAL_TOKENS,
                batch_size=1024, progress_interval=10.0, learn_params=None,
                min_count=None, stream=sys.stderr):
  """Learns a WordPiece vocab from text files.

  Each line is normalized and split into words exactly as
  `BertWordPieceTokenizer(lower_case=lower_case)` does, then tensorflow-text's
  `bert_vocab_from_dataset` counts the words and learns the pieces.

  Args:
    input_patterns: glob or list of globs (each may be comma-separated) of
      UTF-8 text files, read line by line.
    vocab_size: target size, reserved tokens included; the learner returns at
      most this many tokens and usually at least 95% of it.
    lower_case: Python bool; True for an uncased vocab, as in the tokenizer.
    output_file: if given, the vocab is written there (via a temporary file).
    overwrite: allow replacing an existing `output_file`.
    reserved_tokens: tokens placed first, in this order (ids 0, 1, ...).
    batch_size: lines normalized per batch.
    progress_interval: seconds between progress lines on `stream`; None for
      no progress lines.
    learn_params: extra keyword arguments for tensorflow-text's
      `wordpiece_tokenizer_learner_lib.learn` (e.g. `upper_thresh`).
    min_count: the fewest occurrences that make a piece a token, where the learner
      searches for the count that gives vocab_size (its `lower_thresh`; None:
      tensorflow-text's default, LEARNER_MIN_COUNT). On a small corpus fewer pieces
      occur that often than vocab_size asks for, and the vocab comes out smaller: the
      summary line says so.
    stream: where progress and summary lines go.

  Returns:
    The list of vocab tokens.

  Raises:
    ValueError: bad arguments, inputs that hold no words, or an existing
      `output_file` without `overwrite`.
    FileNotFoundError: an input glob that matches no file.
  """
  # Imported here: the learner pulls in modules that library users who only
  # tokenize never need.
  from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset

  reserved_tokens = list(reserved_tokens)
  if vocab_size <= len(reserved_tokens):
    raise errors.InputError(
        f"vocab_size ({vocab_size}) must exceed the number of reserved "
        f"tokens ({len(reserved_tokens)})")
  if output_file and tf.io.gfile.exists(output_file) and not overwrite:
    raise errors.OutputExistsError(
        f"Output file exists: {output_file}; choose another or pass --overwrite "
        f"(overwrite=True) to replace it")
  files = files_lib.expand_patterns(input_patterns, field="input")
  total_bytes = sum(tf.io.gfile.stat(path).length for path in files)
  progress = progress_lib.Progress("build_vocab", total=max(total_bytes, 1), unit="MiB",
                                   scale=2**20, interval=progress_interval, stream=stream)
  start = time.monotonic()

  def line_batches():
    return _line_batches(files, batch_size, progress)

  def split(lines):
    return normalization.split_words(lines, lower_case).flat_values

  # The words are already split exactly as the tokenizer splits them, so the
  # learner's own basic tokenizer (cased, no normalization) leaves them as is:
  # none holds whitespace, punctuation or a CJK character next to others.
  dataset = tf.data.Dataset.from_generator(
      line_batches, output_signature=tf.TensorSpec([None], tf.string))
  dataset = dataset.map(split).filter(lambda words: tf.size(words) > 0)
  learn_params = dict(learn_params or {})
  if min_count is not None:
    if min_count < 1:
      raise errors.InputError(f"min_count must be at least 1, got {min_count}")
    learn_params["lower_thresh"] = min_count
  try:
    tokens = bert_vocab_from_dataset.bert_vocab_from_dataset(
        dataset, vocab_size=vocab_size,
        reserved_tokens=reserved_tokens,
        bert_tokenizer_params=dict(lower_case=False),
        learn_params=learn_params)
  except StopIteration:
    raise errors.InputError(
        f"No words in the input files: {', '.join(files)}") from None
  if progress_interval is not None:
    progress.report()
  if output_file:
    vocab_lib.write_vocab(tokens, output_file)
  shortfall = shortfall_note(len(tokens), vocab_size,
                             learn_params.get("lower_thresh", LEARNER_MIN_COUNT))
  print(
      f"learned {len(tokens)} tokens (target {vocab_size}) from "
      f"{progress.counts.get('lines', 0):.0f} lines, {progress.done / 2**20:.1f} MiB in "
      f"{len(files)} file(s) in {time.monotonic() - start:.1f}s"
      + (f"; wrote {output_file}" if output_file else "")
      + (f". {shortfall}" if shortfall else ""),
      file=stream, flush=True)
  return tokens


def shortfall_note(learned: int, asked: int, min_count: int) -> str:
  """Where the learner gave fewer tokens than asked beyond its 5% slack (too few pieces
  occur min_count times), a sentence saying so and how to get closer; otherwise ""."""
  if learned >= asked * (1 - LEARNER_SLACK):
    return ""
  hint = (f"a lower --min_count (e.g. {max(1, min_count // 5)}) or more text"
          if min_count > 1 else "more text")
  return (f"Fewer tokens than the {asked} asked: too few pieces occur at least "
          f"{min_count} times in the input. {hint[0].upper()}{hint[1:]} gets closer; or "
          f"train with model.encoder.vocab_size={learned}.")
