"""create_pretraining_data as an Apache Beam pipeline, for corpora beyond one machine.

The pipeline does the local tool's work (`create_pretraining_data`) and writes the same
files, byte for byte, on any runner and with any parallelism:

1. Slots. The launcher only lists the input files and their sizes. Each file's chunk
   slots (`pretraining_plan.file_chunks`: one per `chunk_size_mb` begun, numbered over the files in order)
   are spread over the workers, and each worker finds its slot's two cut points and reads
   only that byte range: planning is parallel, and many workers share one big file.
2. Chunks -> pieces. A chunk's instances (seeded by its index) are streamed, in the
   chunk's shuffled order, into one temporary TFRecord file, its piece; a worker holds one
   chunk at a time.
3. Pieces -> shards. Only (shard, chunk index, piece path) goes through the grouping, never
   the records: each shard's writer sorts its pieces by chunk index and streams them into
   the shard (chunk i goes to shard i mod num_shards, as in the local tool). Uncompressed
   TFRecord framing is a pure function of the records, so pieces are concatenated as
   bytes; a GZIP shard is written by TensorFlow's writer from the pieces' records, the
   same calls as the local tool's writer makes.

Pieces, shards and the merged counts are written inside a temporary folder beside the
output; the launcher checks the counts, moves the shards to their names and writes the
JSON summary last, as the local tool does. A failed pipeline leaves neither shards nor a
summary under the output's names. The temporary folder holds the output twice (pieces and
shards) until the launcher removes it.

Needs the `beam` extra (`pip install "bert_tf[beam]"`): apache-beam, and crc32c for the
checksums of TFRecord framing on the workers.
"""

import json
import os
import shutil
import time
from typing import Dict, Iterable, Optional, Sequence

import apache_beam as beam
from apache_beam.options import pipeline_options as beam_options

from bert_tf.data.creation import pretraining_chunks as chunks_lib
from bert_tf.data.records import pretraining_format as fmt
from bert_tf.data.creation import pretraining_inputs as inputs
from bert_tf.data.creation import pretraining_plan as plan_lib
from bert_tf.data.creation import pretraining_summary as summary_lib
from bert_tf.utils import files as files_lib

_COUNTS = "counts"
# Bytes per read when pieces are concatenated.
_COPY_BUFFER = 16 << 20


def _piece_path(temp_dir: str, chunk_index: int) -> str:
  return f"{temp_dir}/piece-{chunk_index:010d}.tfrecord"


def _shard_path(temp_dir: str, shard: int) -> str:
  return f"{temp_dir}/shard-{shard:05d}"


def _slots(file_entry, nominal_bytes: int):
  """(path, size, first index) -> (path, size, first index, slot) for each of its slots."""
  path, size, first = file_entry
  for k in range(plan_lib.num_slots(size, nominal_bytes)):
    yield path, size, first, k


class _SlotToPiece(beam.DoFn):
  """A slot -> its chunk's piece file; yields (shard, (chunk index, piece path)) and the
  chunk's counts on `_COUNTS`."""

  def __init__(self, settings: fmt.PretrainingDataSettings, vocab_file: str,
               nominal_bytes: int, num_shards: int, temp_dir: str):
    super().__init__()
    self._settings = settings
    self._vocab_file = vocab_file
    self._nominal_bytes = nominal_bytes
    self._num_shards = num_shards
    self._temp_dir = temp_dir
    self._special = None
    self._tokenize = None

  def setup(self):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # Once per worker: building the tokenizer imports TensorFlow and loads the vocab.
    self._special = inputs.load_special_ids(self._vocab_file)
    self._tokenize = chunks_lib.make_line_tokenizer(self._vocab_file,
                                                    self._settings.do_lower_case)

  def process(self, element):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    path, size, first, slot = element
    cpu = time.process_time()
    for chunk in plan_lib.file_chunks(path, size, first, self._nominal_bytes, [slot]):
      stats = summary_lib.empty_stats()
      piece = _piece_path(self._temp_dir, chunk.index)
      # A retried bundle rewrites the same bytes; the rename keeps a reader from seeing
      # half of them.
      with files_lib.atomic_path(piece) as tmp:
        with tf.io.TFRecordWriter(tmp) as writer:
          for records in chunks_lib.chunk_records(chunk, self._settings, self._special,
                                                  self._tokenize, stats):
            for record in records:
              writer.write(record)
      stats["cpu_seconds"] = time.process_time() - cpu
      yield plan_lib.shard_of(chunk.index, self._num_shards), (chunk.index, piece)
      yield beam.pvalue.TaggedOutput(_COUNTS, stats)


class _WriteShard(beam.DoFn):
  """(shard, [(chunk index, piece path) or None]) -> the shard's file in the temporary
  folder: its pieces in chunk order, records streamed."""

  def __init__(self, temp_dir: str, gzip: bool):
    super().__init__()
    self._temp_dir = temp_dir
    self._gzip = gzip

  def process(self, element):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    shard, entries = element
    pieces = [p for _, p in sorted(e for e in entries if e is not None)]
    with files_lib.atomic_path(_shard_path(self._temp_dir, shard)) as tmp:
      if self._gzip:
        options = tf.io.TFRecordOptions(compression_type="GZIP")
        with tf.io.TFRecordWriter(tmp, options) as writer:
          for piece in pieces:
            for record in tf.compat.v1.io.tf_record_iterator(piece):
              writer.write(record)
      else:
        with tf.io.gfile.GFile(tmp, "wb") as out:
          out.write(b"")  # GFile creates the file on the first write; a shard may be empty.
          for piece in pieces:
            with tf.io.gfile.GFile(piece, "rb") as f:
              shutil.copyfileobj(f, out, _COPY_BUFFER)
    yield shard


def _merge_all(counts: Iterable[Dict[str, int]]) -> Dict[str, int]:
  total = summary_lib.empty_stats()
  for c in counts:
    summary_lib.merge_stats(total, c)
  return total


def build_pipeline(pipeline: beam.Pipeline, plan: plan_lib.RunPlan, vocab_file: str,
                   settings: fmt.PretrainingDataSettings, gzip: bool, temp_dir: str):
  """Adds the steps to `pipeline`: slots -> pieces -> shards in `temp_dir`, counts ->
  `temp_dir`/counts."""
  num_shards = len(plan.paths)
  file_entries = list(zip(plan.files, plan.sizes,
                          plan_lib.first_indices(plan.sizes, plan.chunk_bytes)))
  outputs = (
      pipeline
      | "Files" >> beam.Create(file_entries)
      | "Slots" >> beam.FlatMap(_slots, plan.chunk_bytes)
      # Spreads the slots over the workers (Create alone may keep them in one bundle).
      | "Spread" >> beam.Reshuffle()
      | "Pieces" >> beam.ParDo(_SlotToPiece(settings, vocab_file, plan.chunk_bytes,
                                            num_shards, temp_dir)).with_outputs(
                                                _COUNTS, main="pieces"))
  # Every shard is written, also one that no chunk reaches (an empty file, as locally).
  every_shard = (pipeline | "ShardIndices" >> beam.Create(range(num_shards))
                 | "NoPiece" >> beam.Map(lambda s: (s, None)))
  _ = ((outputs.pieces, every_shard)
       | "Flatten" >> beam.Flatten()
       | "PiecesPerShard" >> beam.GroupByKey()
       | "Shards" >> beam.ParDo(_WriteShard(temp_dir, gzip)))
  _ = (outputs[_COUNTS]
       | "Merge" >> beam.CombineGlobally(_merge_all)
       | "Json" >> beam.Map(json.dumps)
       | "Counts" >> beam.io.WriteToText(f"{temp_dir}/counts", shard_name_template=""))


def create_pretraining_data(input_file: str, vocab_file: str, output: str,
                            settings: Optional[fmt.PretrainingDataSettings] = None,
                            num_shards: int = 1, gzip: bool = False, overwrite: bool = False,
                            chunk_size_mb: float = 4.0, runner: str = "DirectRunner",
                            pipeline_args: Optional[Sequence[str]] = None) -> Dict:
  """The local tool's `create_pretraining_data` as a Beam pipeline; waits for it to finish.

  Args:
    input_file, vocab_file, output, settings, num_shards, gzip, overwrite, chunk_size_mb:
      as in `create_pretraining_data.create_pretraining_data`; paths may be on any
      `tf.io.gfile` file system the launcher and the workers can reach (gs://, hdfs://).
    runner: a Beam runner (DirectRunner, DataflowRunner, FlinkRunner, SparkRunner,
      PortableRunner, ...).
    pipeline_args: Beam's own pipeline options, e.g. ["--project=p", "--region=r"].

  Returns:
    the summary dict (also written as JSON), as the local tool's, with `runner` the runner's
    name and `num_workers` None.

  Raises:
    PretrainingDataError: bad input, vocab or an existing output (found before the
      pipeline starts, with the local tool's messages), or a failed pipeline.
    ConfigError: impossible settings.
  """
  settings = settings or fmt.PretrainingDataSettings()
  plan = plan_lib.plan_run(input_file, vocab_file, output, settings, num_shards, gzip,
                           overwrite, chunk_size_mb)
  plan_lib.note_empty_shards(
      sum(plan_lib.num_slots(n, plan.chunk_bytes) for n in plan.sizes), num_shards)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  temp_dir = files_lib.temporary_name(fmt.summary_path(output)[:-len(".json")])
  tf.io.gfile.makedirs(temp_dir)
  options = beam_options.PipelineOptions(list(pipeline_args or []) + [f"--runner={runner}"])
  start = time.time()
  moved = []
  try:
    try:
      pipeline = beam.Pipeline(options=options)
      build_pipeline(pipeline, plan, vocab_file, settings, gzip, temp_dir)
      pipeline.run().wait_until_finish()
    except Exception as e:  # pylint: disable=broad-except
      # The runner wraps a worker's exception; its text keeps the file named.
      raise fmt.PretrainingDataError(f"The pipeline failed: {e}") from e
    with tf.io.gfile.GFile(f"{temp_dir}/counts") as f:
      totals = json.loads(f.read())
    summary_lib.check_totals(totals, plan.files)
    for shard, path in enumerate(plan.paths):
      tf.io.gfile.rename(_shard_path(temp_dir, shard), path, overwrite=True)
      moved.append(path)
  except BaseException:
    for path in moved:
      tf.io.gfile.remove(path)
    raise
  finally:
    if tf.io.gfile.exists(temp_dir):
      tf.io.gfile.rmtree(temp_dir)
  elapsed = time.time() - start
  summary = summary_lib.make_summary(totals, settings, plan.files, vocab_file,
                                     plan.special.vocab_size, plan.paths, gzip, None,
                                     chunk_size_mb, plan.chunk_bytes, elapsed, 0.0, [],
                                     runner=runner)
  with files_lib.atomic_open(plan.summary_file) as f:
    json.dump(summary, f, indent=2)
  return summary
