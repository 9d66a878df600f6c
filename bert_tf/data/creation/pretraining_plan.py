"""Planning pretraining data creation: the input cut into document-aligned chunks.

Each input file is a row of chunk slots of `chunk_bytes` each (one per slot begun, the
indices counting over the files in order); a slot's chunk runs from the first document
boundary after its start to the first after its end, so each chunk is found from its own
byte range alone. A chunk's index seeds its random draws and picks its shard
(`shard_of`): the files are a function of the input, the settings, the chunk size and the
shard count alone, whoever processes the chunks.
"""

import dataclasses
import sys
from typing import List, Optional, Sequence

from bert_tf.data.records import pretraining_format as fmt
from bert_tf.data.creation import pretraining_inputs as inputs
from bert_tf.data.creation import pretraining_instances as pi
from bert_tf.utils import files as files_lib


@dataclasses.dataclass(frozen=True)
class Chunk:
  """Bytes [start, end) of one input file, beginning and ending at document boundaries.

  `index` seeds the chunk's random draws (see `pretraining_chunks.chunk_rngs`) and picks
  its shard (see `shard_of`).
  """

  path: str
  start: int
  end: int
  index: int


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
  with files_lib.open_input(path) as f:
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
  sizes = [files_lib.size(f) for f in files] if sizes is None else sizes
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


def plan_run(input_file: str, vocab_file: str, output: str,
             settings: fmt.PretrainingDataSettings, num_shards: int, gzip: bool,
             overwrite: bool, chunk_size_mb: float) -> RunPlan:
  """Checks the settings, inputs (text, see `pretraining_inputs.check_text_file`), vocab
  and outputs; reads the input files' sizes.

  Shared by the local tool and the Beam pipeline, so that both refuse the same bad input
  with the same errors and number their chunks (hence seed and shard them) alike. Only
  sizes are read here: the cut points are found by `plan_chunks` (the local tool) or by
  each chunk's worker (Beam).

  Raises:
    PretrainingDataError: bad input, vocab or an existing output.
    ConfigError: impossible settings.
  """
  settings.validate()
  if num_shards < 1:
    raise fmt.PretrainingDataError("num_shards must be at least 1")
  files = inputs.list_input_files(input_file)
  for path in files:
    warning = inputs.check_text_file(path).warning()
    if warning:
      print(f"[create_pretraining_data] warning: {warning}", file=sys.stderr, flush=True)
  special = inputs.load_special_ids(vocab_file, settings.do_lower_case)
  paths = fmt.output_paths(output, num_shards, gzip)
  summary_file = fmt.summary_path(output)
  existing = [p for p in paths + [summary_file] if files_lib.exists(p)]
  if existing and not overwrite:
    raise fmt.PretrainingDataError(f"Output exists (pass --overwrite to replace it): "
                                   f"{', '.join(existing)}")
  sizes = [files_lib.size(f) for f in files]
  if sum(sizes) == 0:
    raise fmt.PretrainingDataError(f"Input is empty: {', '.join(files)}")
  return RunPlan(files, sizes, special, paths, summary_file,
                 chunk_bytes(chunk_size_mb, sum(sizes), num_shards))

