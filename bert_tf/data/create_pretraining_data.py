"""Creates pretraining TFRecords from raw text, as the original BERT release's tool does.

Input: text files with one sentence per line and a blank line between documents.
Output: sharded TFRecords of `tf.train.Example`s with the original release's features
(`input_ids`, `input_mask`, `segment_ids`, `masked_lm_positions`, `masked_lm_ids`,
`masked_lm_weights`, `next_sentence_labels`), plus a JSON summary beside them.

The input is cut into document-aligned chunks of about `chunk_size_mb` (less for an input
too small to give each shard several chunks, see `chunk_bytes`); each chunk is read,
tokenized, turned into instances, shuffled and written on its own, so memory is bounded by
one chunk, and chunks spread over worker processes. A random next segment comes from
another document of the same chunk. Each chunk's random draws are seeded by
(random_seed, chunk index), and chunk i's instances go, in their shuffled order, to shard
i mod num_shards after those of the shard's earlier chunks. The files are therefore a
function of the input, the settings, the chunk size and the shard count alone: any number
of workers, and the Beam pipeline on any runner, writes identical files.
"""

import dataclasses
import hashlib
import json
import multiprocessing
import os
import random
import re
import sys
import time
import traceback
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from bert_tf import constants
from bert_tf.data import pretraining_instances as pi
from bert_tf.utils import errors
from bert_tf.utils import files as files_lib
from bert_tf.utils import progress as progress_lib

# Instances masked and serialized together (numpy batch size).
_BATCH = 4096
# Lines tokenized per tokenizer call.
_TOKENIZE_BATCH = 8192
_SHARD_PATTERN = re.compile(r"-\d{5}-of-\d{5}\.tfrecord(\.gz)?$")
INCOMPLETE_SUFFIX = ".incomplete"
# An input with more of its lines not UTF-8 than this is taken for a file that is not text.
MAX_INVALID_UTF8_LINE_FRACTION = 0.01
# Invalid lines named in the warning, per file.
_SHOWN_INVALID_LINES = 5
# How much of a file the text check reads: all of a local one, the start of a remote one
# (reading a bucket's corpus twice would double the launcher's I/O).
_REMOTE_TEXT_CHECK_BYTES = 1 << 20
_TEXT_CHECK_BLOCK = 4 << 20


class PretrainingDataError(errors.UserError, ValueError):
  """Bad input or settings, with the offending file or flag named."""


@dataclasses.dataclass(frozen=True)
class PretrainingDataSettings:
  """The original tool's settings (same names and defaults)."""

  max_seq_length: int = 128
  max_predictions_per_seq: int = 20
  masked_lm_prob: float = 0.15
  dupe_factor: int = 10
  short_seq_prob: float = 0.1
  random_seed: int = 12345
  do_lower_case: bool = True
  do_whole_word_mask: bool = False

  def validate(self):
    if self.max_seq_length < 5:
      raise PretrainingDataError(f"max_seq_length must be at least 5, got {self.max_seq_length}")
    if self.max_predictions_per_seq < 1:
      raise PretrainingDataError("max_predictions_per_seq must be at least 1")
    if not 0.0 < self.masked_lm_prob < 1.0:
      raise PretrainingDataError(f"masked_lm_prob must be in (0, 1), got {self.masked_lm_prob}")
    if self.dupe_factor < 1:
      raise PretrainingDataError(f"dupe_factor must be at least 1, got {self.dupe_factor}")
    if not 0.0 <= self.short_seq_prob <= 1.0:
      raise PretrainingDataError(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob}")


@dataclasses.dataclass(frozen=True)
class Chunk:
  """Bytes [start, end) of one input file, beginning and ending at document boundaries.

  `index` seeds the chunk's random draws (see `chunk_rngs`) and picks its shard (see
  `shard_of`).
  """

  path: str
  start: int
  end: int
  index: int


# ---------------------------------------------------------------------------------------
# Inputs.


def list_input_files(input_file: str) -> List[str]:
  """Expands comma-separated globs (see `bert_tf.utils.files.expand_patterns`)."""
  try:
    return files_lib.expand_patterns(input_file, field="--input_file")
  except FileNotFoundError as e:
    raise PretrainingDataError(str(e)) from None


@dataclasses.dataclass
class TextCheck:
  """What `check_text_file` found in one input file."""

  path: str
  lines: int = 0
  invalid_lines: int = 0
  first_invalid: List[int] = dataclasses.field(default_factory=list)
  complete: bool = True  # False: only the start of a remote file was read.

  def warning(self) -> Optional[str]:
    """One line naming the file and its first invalid lines; None when all are UTF-8."""
    if not self.invalid_lines:
      return None
    shown = ", ".join(str(n) for n in self.first_invalid)
    more = ", ..." if self.invalid_lines > len(self.first_invalid) else ""
    scope = "" if self.complete else f" in its first {self.lines} lines"
    return (f"{self.path}: {self.invalid_lines} line(s) not valid UTF-8{scope} (lines "
            f"{shown}{more}); their invalid bytes become U+FFFD")


def check_text_file(path: str) -> TextCheck:
  """Checks that an input file is UTF-8 text: no NUL byte, at most
  MAX_INVALID_UTF8_LINE_FRACTION of its lines invalid UTF-8.

  Reads local files in full (blocks decoded at C speed, lines looked at one by one only
  in a block that fails to decode) and the first MiB of remote ones.

  Returns:
    TextCheck with the line counts and the first invalid lines (1-based).

  Raises:
    PretrainingDataError: naming the file, and the byte offset of a NUL byte or the
      share of invalid lines.
  """
  check = TextCheck(path)
  limit = None if _is_local(path) else _REMOTE_TEXT_CHECK_BYTES
  read = 0
  pending = b""
  with open_input(path) as f:
    while True:
      want = _TEXT_CHECK_BLOCK if limit is None else min(_TEXT_CHECK_BLOCK, limit - read)
      data = f.read(want) if want > 0 else b""
      nul = data.find(b"\0")
      if nul >= 0:
        raise PretrainingDataError(f"{path}: not a text file (a NUL byte at byte offset "
                                   f"{read + nul})")
      read += len(data)
      if not data:
        check.complete = want > 0
        # The tail of a file read only in part may end inside a character.
        block, pending = (pending if check.complete else b""), b""
      else:
        pending += data
        cut = pending.rfind(b"\n") + 1  # Whole lines only; the rest waits.
        block, pending = pending[:cut], pending[cut:]
      if block:
        _count_lines(block, check)
      if not data:
        break
  if check.invalid_lines > MAX_INVALID_UTF8_LINE_FRACTION * max(check.lines, 1):
    raise PretrainingDataError(
        f"{path}: not a UTF-8 text file ({check.invalid_lines} of its {check.lines} lines "
        f"{'read ' if not check.complete else ''}are not valid UTF-8, first at line(s) "
        f"{', '.join(str(n) for n in check.first_invalid)})")
  return check


def _count_lines(block: bytes, check: TextCheck) -> None:
  """Adds a block of whole lines (the last one may lack its newline) to `check`."""
  try:
    block.decode("utf-8")
    check.lines += block.count(b"\n") + (not block.endswith(b"\n"))
    return
  except UnicodeDecodeError:
    pass
  lines = block.split(b"\n")
  if lines[-1] == b"":
    lines.pop()
  for number, line in enumerate(lines, start=check.lines + 1):
    try:
      line.decode("utf-8")
    except UnicodeDecodeError:
      check.invalid_lines += 1
      if len(check.first_invalid) < _SHOWN_INVALID_LINES:
        check.first_invalid.append(number)
  check.lines += len(lines)


def load_special_ids(vocab_file: str) -> pi.SpecialIds:
  """The vocab's special ids and size, read by `bert_tf.text.vocab.load_vocab`.

  Raises:
    PretrainingDataError: naming the file (and line) when it is missing, malformed or
      lacks a special token.
  """
  # Imported here, as in make_line_tokenizer: importing this module needs no TensorFlow.
  from bert_tf.text import vocab as vocab_lib  # pylint: disable=g-import-not-at-top
  if not vocab_file:
    raise PretrainingDataError("Vocab file not found: '' (pass --vocab_file)")
  try:
    return pi.SpecialIds.from_vocab(vocab_lib.load_vocab(vocab_file), vocab_file)
  except (FileNotFoundError, ValueError) as e:
    raise PretrainingDataError(str(e)) from None


def _is_local(path: str) -> bool:
  return "://" not in path


def open_input(path: str):
  """Opens an input file for binary reading: local files directly (the fast path), others
  (gs://, hdfs://, ...) through `tf.io.gfile`."""
  if _is_local(path):
    return open(path, "rb")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.io.gfile.GFile(path, "rb")


def input_size(path: str) -> int:
  """An input file's size in bytes (local or any `tf.io.gfile` file system)."""
  if _is_local(path):
    return os.path.getsize(path)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.io.gfile.stat(path).length


# A small input is cut finer than chunk_size_mb so that each shard gets about this many
# chunks (shards hold whole chunks: too few chunks leave shards uneven or empty, and a
# trainer that reads one shard per replica would starve a replica).
_CHUNKS_PER_SHARD = 4
# ... but never finer than this, so that a chunk keeps several documents for its random
# next segments.
_MIN_CHUNK_BYTES = 16 << 10


def chunk_bytes(chunk_size_mb: float, total_bytes: int = 0, num_shards: int = 1) -> int:
  """The nominal chunk size in bytes: `chunk_size_mb`, or less for an input of
  `total_bytes` too small to give each of `num_shards` shards `_CHUNKS_PER_SHARD` chunks
  (not below `_MIN_CHUNK_BYTES`). A function of its arguments alone, so every runner cuts
  the same grid."""
  nominal = max(1, int(chunk_size_mb * (1 << 20)))
  balanced = -(-total_bytes // (num_shards * _CHUNKS_PER_SHARD))
  return min(nominal, max(balanced, _MIN_CHUNK_BYTES))


def num_slots(size: int, nominal_bytes: int) -> int:
  """Chunk slots of a file of `size` bytes: one per `nominal_bytes` begun."""
  return -(-size // nominal_bytes)


def first_indices(sizes: Sequence[int], nominal_bytes: int) -> List[int]:
  """Each file's first chunk index: indices count every file's slots, files in order."""
  firsts, total = [], 0
  for size in sizes:
    firsts.append(total)
    total += num_slots(size, nominal_bytes)
  return firsts


def _document_boundary(f, position: int, size: int) -> int:
  """The end of the first blank line after the line that byte `position` falls in (0 and
  `size` for positions at or beyond the file's ends)."""
  if position <= 0:
    return 0
  if position >= size:
    return size
  f.seek(position)
  f.readline()  # The rest of the line the position fell into.
  while True:
    line = f.readline()
    if not line or not line.strip():
      return min(f.tell(), size)


def file_chunks(path: str, size: int, first_index: int, nominal_bytes: int,
                slots: Optional[Sequence[int]] = None) -> List[Chunk]:
  """The chunks of some slots (default all) of one file.

  Slot k runs from the first document boundary after byte k * nominal_bytes to the first
  after byte (k + 1) * nominal_bytes, so each slot is found from its own byte range alone
  (the Beam pipeline plans slots in parallel, each where it is processed). Its chunk's
  index is first_index + k. A slot inside a document longer than `nominal_bytes` is empty
  and left out; that document stays whole. Only the cut points are read.
  """
  slots = range(num_slots(size, nominal_bytes)) if slots is None else slots
  chunks = []
  with open_input(path) as f:
    previous, end = None, 0
    for k in slots:
      start = end if previous == k - 1 else _document_boundary(f, k * nominal_bytes, size)
      end = _document_boundary(f, (k + 1) * nominal_bytes, size)
      previous = k
      if end > start:
        chunks.append(Chunk(path, start, end, first_index + k))
  return chunks


def plan_chunks(files: Sequence[str], nominal_bytes: int,
                sizes: Optional[Sequence[int]] = None) -> List[Chunk]:
  """Cuts files into chunks of about `nominal_bytes`, each ending after a blank line
  (see `file_chunks`), in index order."""
  sizes = [input_size(f) for f in files] if sizes is None else sizes
  return [chunk for path, size, first in zip(files, sizes, first_indices(sizes, nominal_bytes))
          for chunk in file_chunks(path, size, first, nominal_bytes)]


def shard_of(chunk_index: int, num_shards: int) -> int:
  """The shard that a chunk's instances go to."""
  return chunk_index % num_shards


def note_empty_shards(num_chunks: int, num_shards: int):
  """Says on stderr that shards beyond the chunks stay empty, if any do."""
  if num_chunks < num_shards:
    print(f"[create_pretraining_data] at least {num_shards - num_chunks} of the {num_shards} "
          f"shards stay empty: each chunk goes to one shard and there are at most "
          f"{num_chunks} chunk(s) (a smaller --chunk_size_mb makes more)", file=sys.stderr)


def read_chunk(chunk: Chunk) -> Tuple[List[str], int]:
  """Decodes a chunk as UTF-8, replacing invalid bytes.

  Returns:
    (lines, number of invalid byte sequences replaced by U+FFFD).
  """
  with open_input(chunk.path) as f:
    f.seek(chunk.start)
    raw = f.read(chunk.end - chunk.start)
  text = raw.decode("utf-8", errors="replace")
  replaced = text.count("\ufffd") - raw.count(b"\xef\xbf\xbd")
  # Lines end at "\n" only, as the original's readline(); other separators stay inside.
  return text.split("\n"), replaced


def make_line_tokenizer(vocab_file: str, lower_case: bool
                        ) -> Callable[[List[str]], Tuple[np.ndarray, np.ndarray]]:
  """Returns tokenize(lines) -> (flat ids int32 [num_tokens], row lengths int64 [lines]).

  The project's WordPiece tokenizer (the original's normalization, words of up to 200
  characters as the original allows) with its fast WordPiece path, over batches of lines.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.text import tokenizer as tokenizer_lib  # pylint: disable=g-import-not-at-top
  tokenizer = tokenizer_lib.BertWordPieceTokenizer(vocab_file, lower_case=lower_case,
                                                   max_chars_per_word=200, fast=True)

  def tokenize(lines):
    ids = tokenizer.tokenize_pieces(tf.constant(lines, dtype=tf.string))
    return (ids.flat_values.numpy().astype(np.int32),
            ids.row_lengths().numpy().astype(np.int64, copy=False))

  return tokenize


def tokenize_documents(lines: Sequence[str], tokenize, batch_size: int = _TOKENIZE_BATCH):
  """Tokenizes lines into documents (a blank line ends one), dropping empty ones.

  Returns:
    (tokens int32 [T], sentence_offsets int64 [S + 1], document_offsets int64 [D + 1]).
  """
  sentences, doc_ids = [], []
  doc = 0
  for line in lines:
    line = line.strip()
    if line:
      sentences.append(line)
      doc_ids.append(doc)
    else:
      doc += 1
  token_parts, length_parts = [], []
  for i in range(0, len(sentences), batch_size):
    flat, lengths = tokenize(sentences[i:i + batch_size])
    token_parts.append(flat)
    length_parts.append(lengths)
  tokens = np.concatenate(token_parts) if token_parts else np.zeros([0], np.int32)
  lengths = np.concatenate(length_parts) if length_parts else np.zeros([0], np.int64)
  # Sentences with no tokens are dropped, as the original does.
  keep = lengths > 0
  lengths = lengths[keep]
  doc_ids = np.asarray(doc_ids, dtype=np.int64)[keep]
  sentence_offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
  np.cumsum(lengths, out=sentence_offsets[1:])
  doc_starts = np.flatnonzero(np.diff(doc_ids, prepend=-1))
  document_offsets = np.append(doc_starts, len(lengths)).astype(np.int64)
  return tokens.astype(np.int32, copy=False), sentence_offsets, document_offsets


# ---------------------------------------------------------------------------------------
# Outputs.


def output_paths(output: str, num_shards: int, gzip: bool) -> List[str]:
  """`{output}-00000-of-0000N.tfrecord[.gz]`; an output ending in .tfrecord is used as is
  for one shard and gets the shard index before the extension otherwise."""
  ext = ".tfrecord.gz" if gzip else ".tfrecord"
  base = output
  for known in (".tfrecord.gz", ".tfrecord"):
    if base.endswith(known):
      base = base[:-len(known)]
      if num_shards == 1:
        return [base + ext]
  return [f"{base}-{i:05d}-of-{num_shards:05d}{ext}" for i in range(num_shards)]


def summary_path(output: str) -> str:
  """The JSON summary's path: the output prefix (extension dropped) + `.json`."""
  base = output
  for known in (".tfrecord.gz", ".tfrecord"):
    if base.endswith(known):
      base = base[:-len(known)]
  return base + ".json"


def summary_path_for_record_file(path: str) -> str:
  """The summary path of a TFRecord file written by this tool."""
  base = _SHARD_PATTERN.sub("", path)
  if base == path:
    base = re.sub(r"\.tfrecord(\.gz)?$", "", path)
  return base + ".json"


class _ShardWriters:
  """Writers of some shards (shard index -> path), each to a temporary name until closed."""

  def __init__(self, paths: Dict[int, str], gzip: bool):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    options = tf.io.TFRecordOptions(compression_type="GZIP" if gzip else "")
    self._writers = {s: tf.io.TFRecordWriter(p + INCOMPLETE_SUFFIX, options)
                     for s, p in paths.items()}

  def write(self, shard: int, records: Sequence[bytes]):
    writer = self._writers[shard]
    for record in records:
      writer.write(record)

  def close(self):
    for w in self._writers.values():
      w.close()


# ---------------------------------------------------------------------------------------
# One chunk.

_STAT_KEYS = ("chunks", "bytes", "lines", "documents", "sentences", "instances", "tokens",
              "non_special_tokens", "masked", pi.MASKED, pi.RANDOM, pi.KEPT,
              "random_next", "single_sentence_chunks", "short_target_instances", "document_passes",
              "short_target_passes", "truncated_instances", "invalid_utf8_replacements",
              "max_token_id", "cpu_seconds")


def empty_stats() -> Dict[str, int]:
  """Zero counts under the keys that chunks report and the summary is made from."""
  return {k: 0 for k in _STAT_KEYS}


def merge_stats(into: Dict[str, int], other: Dict[str, int]):
  """Adds `other`'s counts to `into` (the largest token id is kept, not added)."""
  for k in _STAT_KEYS:
    into[k] = max(into[k], other[k]) if k == "max_token_id" else into[k] + other[k]


def chunk_rngs(random_seed: int, chunk_index: int):
  """The (random.Random, numpy Generator) of one chunk, fixed by seed and index."""
  return (random.Random(random_seed * 1_000_003 + chunk_index),
          np.random.default_rng([random_seed, chunk_index]))


def create_examples_from_documents(tokens: np.ndarray, sentence_offsets, document_offsets,
                                   settings: PretrainingDataSettings,
                                   special: pi.SpecialIds, rng: random.Random,
                                   np_rng: np.random.Generator,
                                   stats: Optional[Dict[str, int]] = None):
  """Yields lists of serialized tf.train.Example bytes, shuffled, from tokenized documents.

  Args:
    tokens: int32 [T]; sentence_offsets int [S + 1]; document_offsets int [D + 1] (see
      pretraining_instances.create_instance_spans).
    stats: a dict to add counts to (keys of the summary).
  """
  stats = stats if stats is not None else empty_stats()
  num_docs = len(document_offsets) - 1
  if num_docs < 1:
    return
  spans, short_passes = pi.create_instance_spans(
      sentence_offsets, document_offsets, settings.max_seq_length, settings.short_seq_prob,
      settings.dupe_factor, rng)
  stats["document_passes"] += num_docs * settings.dupe_factor
  stats["short_target_passes"] += short_passes
  before = spans.a_length + spans.b_length
  spans = pi.truncate_spans(spans, settings.max_seq_length, np_rng)
  stats["truncated_instances"] += int(np.sum(spans.a_length + spans.b_length < before))
  spans = spans.take(np_rng.permutation(len(spans)))
  for begin in range(0, len(spans), _BATCH):
    batch = spans.take(slice(begin, begin + _BATCH))
    input_ids, segment_ids, input_mask, candidates = pi.build_sequences(
        tokens, batch, settings.max_seq_length, special)
    masked = pi.mask_sequences(input_ids, input_mask, candidates, settings.masked_lm_prob,
                               settings.max_predictions_per_seq, special, np_rng,
                               settings.do_whole_word_mask)
    n = len(batch)
    stats["instances"] += n
    num_tokens = int(input_mask.sum())
    stats["tokens"] += num_tokens
    stats["non_special_tokens"] += num_tokens - 3 * n
    stats["masked"] += int(masked.masked_lm_weights.sum())
    for k, v in masked.outcome_counts.items():
      stats[k] += v
    stats["random_next"] += int(batch.is_random_next.sum())
    stats["single_sentence_chunks"] += int(batch.single_sentence.sum())
    stats["short_target_instances"] += int(batch.short_target.sum())
    yield pi.serialize_examples(pi.example_features(
        input_ids, input_mask, segment_ids, masked, batch.is_random_next))


def chunk_records(chunk: Chunk, settings: PretrainingDataSettings,
                  special: pi.SpecialIds, tokenize, stats: Dict[str, int]):
  """Reads, tokenizes and turns one chunk into examples; the local tool's and the Beam
  pipeline's one unit of work.

  The instances and their order depend only on the chunk's bytes, its index (the seed)
  and the settings.

  Args:
    stats: a dict from `empty_stats` that the chunk's counts are added to.

  Yields:
    lists of serialized tf.train.Example bytes, in the chunk's shuffled order.
  """
  lines, replaced = read_chunk(chunk)
  stats["chunks"] += 1
  stats["bytes"] += chunk.end - chunk.start
  stats["lines"] += len(lines)
  stats["invalid_utf8_replacements"] += replaced
  tokens, sentence_offsets, document_offsets = tokenize_documents(lines, tokenize)
  del lines
  stats["documents"] += len(document_offsets) - 1
  stats["sentences"] += len(sentence_offsets) - 1
  if tokens.size:
    max_id = int(tokens.max())
    stats["max_token_id"] = max(stats["max_token_id"], max_id)
    if max_id >= special.vocab_size or int(tokens.min()) < 0:
      raise PretrainingDataError(f"{chunk.path}: the tokenizer returned ids outside the vocab")
  rng, np_rng = chunk_rngs(settings.random_seed, chunk.index)
  yield from create_examples_from_documents(tokens, sentence_offsets, document_offsets,
                                            settings, special, rng, np_rng, stats)


# ---------------------------------------------------------------------------------------
# Workers.


def _run_worker(worker_index: int, num_workers: int, chunks: Sequence[Chunk],
                shard_paths: Sequence[str], gzip: bool, settings: PretrainingDataSettings,
                vocab_file: str, report: Callable):
  """Writes shards worker_index, worker_index + num_workers, ...: their chunks, in order."""
  special = load_special_ids(vocab_file)
  tokenize = make_line_tokenizer(vocab_file, settings.do_lower_case)
  num_shards = len(shard_paths)
  writers = _ShardWriters({s: shard_paths[s] for s in range(worker_index, num_shards,
                                                            num_workers)}, gzip)
  report(("ready", None))
  total = empty_stats()
  try:
    for chunk in chunks:
      shard = shard_of(chunk.index, num_shards)
      if shard % num_workers != worker_index:
        continue
      cpu = time.process_time()
      stats = empty_stats()
      for records in chunk_records(chunk, settings, special, tokenize, stats):
        writers.write(shard, records)
      stats["cpu_seconds"] = time.process_time() - cpu
      merge_stats(total, stats)
      report(("progress", stats))
  finally:
    writers.close()
  return total


def _subprocess_worker(worker_index, num_workers, chunks, shard_paths, gzip, settings,
                       vocab_file, queue):
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  try:
    total = _run_worker(worker_index, num_workers, chunks, shard_paths, gzip, settings,
                        vocab_file, queue.put)
    queue.put(("done", total))
  except errors.UserError as e:
    queue.put(("user_error", str(e)))
  except BaseException as e:  # pylint: disable=broad-except
    queue.put(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))


class _Progress(progress_lib.Progress):
  """The progress line over input bytes, with instances as a side count.

  Rates count from the moment every worker is ready (TensorFlow imported, tokenizer
  built), so that they and the ETA describe the work, not the start-up.
  """

  def __init__(self, total_bytes: int, enabled: bool, num_workers: int,
               interval: float = 5.0):
    super().__init__("create_pretraining_data", total=max(total_bytes, 1), unit="MB",
                     scale=1e6, interval=interval if enabled else None)
    self.launched = self.start
    self.waiting_for = num_workers
    self.ready_time = None

  def handle(self, message):
    """Takes a worker's ("ready", None) or ("progress", stats) message."""
    kind, payload = message
    if kind == "ready":
      self.waiting_for -= 1
      if self.waiting_for == 0:
        self.ready_time = time.monotonic()
        self.restart()
    else:
      self.update(payload["bytes"], instances=payload["instances"])

  @property
  def startup_seconds(self) -> float:
    return (self.ready_time or time.monotonic()) - self.launched


def _vocab_sha256(vocab_file: str) -> str:
  with open_input(vocab_file) as f:
    return hashlib.sha256(f.read()).hexdigest()


def _remove_quietly(path: str):
  try:
    os.remove(path)
  except OSError:
    pass


@dataclasses.dataclass(frozen=True)
class RunPlan:
  """What a run reads and writes, checked before any work starts."""

  files: List[str]
  sizes: List[int]
  special: pi.SpecialIds
  paths: List[str]
  summary_file: str
  # The nominal chunk size (see `file_chunks`).
  chunk_bytes: int

  @property
  def total_bytes(self) -> int:
    return sum(self.sizes)


def plan_run(input_file: str, vocab_file: str, output: str, settings: PretrainingDataSettings,
             num_shards: int, gzip: bool, overwrite: bool, chunk_size_mb: float) -> RunPlan:
  """Checks the settings, inputs (text, see `check_text_file`), vocab and outputs; reads
  the input files' sizes.

  Shared by the local tool and the Beam pipeline, so that both refuse the same bad input
  with the same errors and number their chunks (hence seed and shard them) alike. Only
  sizes are read here: the cut points are found by `plan_chunks` (the local tool) or by
  each chunk's worker (Beam).

  Raises:
    PretrainingDataError: bad input, vocab, settings or an existing output.
  """
  settings.validate()
  if num_shards < 1:
    raise PretrainingDataError("num_shards must be at least 1")
  files = list_input_files(input_file)
  for path in files:
    warning = check_text_file(path).warning()
    if warning:
      print(f"[create_pretraining_data] warning: {warning}", file=sys.stderr, flush=True)
  special = load_special_ids(vocab_file)
  paths = output_paths(output, num_shards, gzip)
  summary_file = summary_path(output)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  existing = [p for p in paths + [summary_file] if tf.io.gfile.exists(p)]
  if existing and not overwrite:
    raise PretrainingDataError(f"Output exists (pass --overwrite to replace it): "
                               f"{', '.join(existing)}")
  sizes = [input_size(f) for f in files]
  if sum(sizes) == 0:
    raise PretrainingDataError(f"Input is empty: {', '.join(files)}")
  return RunPlan(files, sizes, special, paths, summary_file,
                 chunk_bytes(chunk_size_mb, sum(sizes), num_shards))


def check_totals(totals: Dict[str, int], files: Sequence[str]):
  """Raises PretrainingDataError when the whole input made no documents or instances."""
  if totals["documents"] == 0:
    raise PretrainingDataError(f"No documents in the input (every line is blank or "
                               f"tokenizes to nothing): {', '.join(files)}")
  if totals["instances"] == 0:
    raise PretrainingDataError(f"No instances could be made from {', '.join(files)}")


def create_pretraining_data(input_file: str, vocab_file: str, output: str,
                            settings: PretrainingDataSettings = PretrainingDataSettings(),
                            num_shards: int = 1, num_workers: int = 1, gzip: bool = False,
                            overwrite: bool = False, chunk_size_mb: float = 4.0,
                            progress: bool = True) -> Dict:
  """Creates pretraining TFRecords and their JSON summary; the tool's whole work.

  Args:
    input_file: comma-separated globs of text files (one sentence per line, blank line
      between documents).
    vocab_file: WordPiece vocab, one token per line, with [PAD] [UNK] [CLS] [SEP] [MASK].
    output: output prefix (see `output_paths`); the summary goes to `summary_path(output)`.
    settings: the original tool's settings.
    num_shards: output files; chunk i's instances go to shard i mod num_shards.
    num_workers: processes; each writes its own shards, so at most num_shards are used.
      The files do not depend on it.
    gzip: GZIP-compress the TFRecords.
    overwrite: replace existing outputs (otherwise they are an error).
    chunk_size_mb: input is processed in document-aligned chunks of about this size (less
      for a small input, see `chunk_bytes`).
    progress: print a progress line to stderr every few seconds.

  Returns:
    the summary dict (also written as JSON).

  Raises:
    PretrainingDataError: bad input, vocab, settings or an existing output.
  """
  if num_workers < 1:
    raise PretrainingDataError("num_shards and num_workers must be at least 1")
  plan = plan_run(input_file, vocab_file, output, settings, num_shards, gzip, overwrite,
                  chunk_size_mb)
  files, paths = plan.files, plan.paths
  chunks = plan_chunks(files, plan.chunk_bytes, plan.sizes)
  out_dir = os.path.dirname(os.path.abspath(paths[0]))
  files_lib.make_dirs(out_dir)
  workers = max(1, min(num_workers, num_shards, len(chunks)))
  if progress:
    note_empty_shards(len(chunks), num_shards)
  if progress and workers < num_workers:
    print(f"[create_pretraining_data] using {workers} worker(s): each worker writes its own "
          f"shards and there are {num_shards} shard(s) and {len(chunks)} chunk(s)",
          file=sys.stderr)

  start = time.time()
  tracker = _Progress(plan.total_bytes, progress, workers)
  totals = empty_stats()
  worker_cpu_seconds = []
  try:
    if workers == 1:
      worker_totals = _run_worker(0, 1, chunks, paths, gzip, settings, vocab_file,
                                  tracker.handle)
      worker_cpu_seconds.append(worker_totals["cpu_seconds"])
      merge_stats(totals, worker_totals)
    else:
      merge_stats(totals, _run_in_processes(workers, chunks, paths, gzip, settings,
                                            vocab_file, tracker, worker_cpu_seconds))
    check_totals(totals, files)
  except BaseException:
    for p in paths:
      _remove_quietly(p + INCOMPLETE_SUFFIX)
    raise
  for p in paths:
    os.replace(p + INCOMPLETE_SUFFIX, p)
  elapsed = time.time() - start

  summary = make_summary(totals, settings, files, vocab_file, plan.special.vocab_size, paths,
                         gzip, workers, chunk_size_mb, plan.chunk_bytes, elapsed,
                         tracker.startup_seconds, worker_cpu_seconds)
  with files_lib.atomic_open(plan.summary_file) as f:
    json.dump(summary, f, indent=2)
  return summary


def _run_in_processes(workers, chunks, paths, gzip, settings, vocab_file, tracker,
                      worker_cpu_seconds):
  """Runs the workers in processes; returns their merged counts.

  Each worker's CPU seconds of work are appended to `worker_cpu_seconds`.
  """
  # Spawned, not forked: TensorFlow's runtime threads do not survive a fork.
  ctx = multiprocessing.get_context("spawn")
  queue = ctx.Queue()
  procs = [ctx.Process(target=_subprocess_worker,
                       args=(w, workers, chunks, paths, gzip, settings, vocab_file, queue),
                       daemon=True) for w in range(workers)]
  for p in procs:
    p.start()
  totals = empty_stats()
  done = 0
  try:
    while done < workers:
      try:
        kind, payload = queue.get(timeout=1.0)
      except Exception:  # pylint: disable=broad-except
        dead = [p for p in procs if p.exitcode not in (None, 0)]
        if dead:
          raise PretrainingDataError(f"A worker process died (exit code {dead[0].exitcode})")
        continue
      if kind in ("ready", "progress"):
        tracker.handle((kind, payload))
      elif kind == "done":
        merge_stats(totals, payload)
        worker_cpu_seconds.append(payload["cpu_seconds"])
        done += 1
      elif kind == "user_error":
        raise PretrainingDataError(payload)
      else:
        raise PretrainingDataError(f"A worker failed: {payload}")
  finally:
    for p in procs:
      if p.is_alive() and done < workers:
        p.terminate()
      p.join()
  return totals


def make_summary(totals, settings, files, vocab_file, vocab_size, paths, gzip, workers,
                 chunk_size_mb, chunk_bytes_used, elapsed, startup_seconds, worker_cpu_seconds,
                 runner: str = "local") -> Dict:
  """The JSON summary from the merged chunk counts (`empty_stats` keys) and the run's facts.

  `runner` is "local" for the tool's worker processes, else the Beam runner's name; a
  Beam run reports `num_workers` None (the runner chooses) and no per-worker CPU times.
  """
  masked = max(totals["masked"], 1)
  instances = max(totals["instances"], 1)
  return {
      "instances": totals["instances"],
      "tokens": totals["tokens"],
      "non_special_tokens": totals["non_special_tokens"],
      "masked_tokens": totals["masked"],
      "masked_fraction_of_non_special": totals["masked"] / max(totals["non_special_tokens"], 1),
      "masked_outcome_fractions": {k: totals[k] / masked for k in (pi.MASKED, pi.RANDOM,
                                                                   pi.KEPT)},
      "next_sentence_random_fraction": totals["random_next"] / instances,
      # One-sentence chunks always take a random B (as in the original release), so the
      # random share is about 0.5 + 0.5 * this.
      "single_sentence_chunk_fraction": totals["single_sentence_chunks"] / instances,
      "short_target_document_pass_fraction":
          totals["short_target_passes"] / max(totals["document_passes"], 1),
      "short_target_instance_fraction": totals["short_target_instances"] / instances,
      "truncated_instance_fraction": totals["truncated_instances"] / instances,
      "documents": totals["documents"],
      "sentences": totals["sentences"],
      "lines": totals["lines"],
      "input_bytes": totals["bytes"],
      "chunks": totals["chunks"],
      "invalid_utf8_replacements": totals["invalid_utf8_replacements"],
      "max_token_id": totals["max_token_id"],
      "vocab_size": vocab_size,
      "vocab_file": _absolute(vocab_file),
      "vocab_sha256": _vocab_sha256(vocab_file),
      "settings": dataclasses.asdict(settings),
      "seq_length": settings.max_seq_length,
      "max_predictions_per_seq": settings.max_predictions_per_seq,
      "feature_names": list(constants.TFRECORD_TO_MODEL_INPUT),
      "input_files": [_absolute(f) for f in files],
      "output_files": [_absolute(p) for p in paths],
      "compression_type": "GZIP" if gzip else "",
      "runner": runner,
      "num_workers": workers,
      "chunk_size_mb": chunk_size_mb,
      "chunk_bytes": chunk_bytes_used,
      "seconds": elapsed,
      "instances_per_second": totals["instances"] / max(elapsed, 1e-9),
      # Until every worker had TensorFlow imported and its tokenizer built.
      "startup_seconds": startup_seconds,
      # CPU time of the chunks' processing, all workers and their threads, start-up left
      # out: on a shared machine a steadier measure of the work than the wall clock.
      "work_cpu_seconds": totals["cpu_seconds"],
      # Per worker: the largest is the work's critical path when each has a core.
      "work_cpu_seconds_per_worker": worker_cpu_seconds,
      "instances_per_second_after_startup":
          totals["instances"] / max(elapsed - startup_seconds, 1e-9),
  }


def _absolute(path: str) -> str:
  return os.path.abspath(path) if _is_local(path) else path
