"""create_pretraining_data as an Apache Beam pipeline, for corpora beyond one machine.

The pipeline runs the local tool's plan and unit of work (`create_pretraining_data.plan_run`
and `chunk_records`): the input is cut into document-aligned byte ranges of about
`chunk_size_mb`, chunk i is seeded by (random_seed, i) and draws its random next segments
from its own documents. For the same input, vocab, settings, seed and chunk size it
therefore writes exactly the instances the local tool writes, on any runner and with any
parallelism; which shard an instance lands in, and the order within a shard, are the
runner's.

Chunks are spread over the workers, and a worker reads only its chunks' byte ranges, so
many workers share one big file and a worker holds one chunk at a time. The records go
through Beam's TFRecord sink, which writes temporary files and gives them the shard names
only once every shard is complete; the pipeline's merged counts are written beside the
output and turned into the JSON summary by the launcher last, as the local tool does. A
failed pipeline leaves neither shards nor a summary under the output's names.

Needs the `beam` extra (`pip install "bert_tf[beam]"`): apache-beam and google-crc32c,
the fast CRC that TFRecord framing needs.
"""

import json
import os
import time
import uuid
from typing import Dict, Iterable, Optional, Sequence

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.options import pipeline_options as beam_options

from bert_tf.data import create_pretraining_data as cpd
from bert_tf.utils import files as files_lib

_COUNTS = "counts"


class _ChunkToRecords(beam.DoFn):
  """(chunk index, Chunk) -> serialized tf.train.Example bytes; counts on `_COUNTS`."""

  def __init__(self, settings: cpd.PretrainingDataSettings, vocab_file: str):
    super().__init__()
    self._settings = settings
    self._vocab_file = vocab_file
    self._special = None
    self._tokenize = None

  def setup(self):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # Once per worker: building the tokenizer imports TensorFlow and loads the vocab.
    self._special = cpd.load_special_ids(self._vocab_file)
    self._tokenize = cpd.make_line_tokenizer(self._vocab_file, self._settings.do_lower_case)

  def process(self, element):
    index, chunk = element
    cpu = time.process_time()
    stats = cpd.empty_stats()
    for records in cpd.chunk_records(chunk, index, self._settings, self._special,
                                     self._tokenize, stats):
      yield from records
    stats["cpu_seconds"] = time.process_time() - cpu
    yield beam.pvalue.TaggedOutput(_COUNTS, stats)


def _merge_all(counts: Iterable[Dict[str, int]]) -> Dict[str, int]:
  total = cpd.empty_stats()
  for c in counts:
    cpd.merge_stats(total, c)
  return total


def _sink_naming(path: str, num_shards: int, gzip: bool):
  """(file_path_prefix, shard_name_template, file_name_suffix) that make Beam's sink write
  `cpd.output_paths`."""
  ext = ".tfrecord.gz" if gzip else ".tfrecord"
  if num_shards == 1:
    return path[:-len(ext)], "", ext
  suffix = f"-00000-of-{num_shards:05d}{ext}"
  return path[:-len(suffix)], "-SSSSS-of-NNNNN", ext


def build_pipeline(pipeline: beam.Pipeline, plan: cpd.RunPlan, vocab_file: str,
                   settings: cpd.PretrainingDataSettings, gzip: bool, counts_path: str):
  """Adds the steps to `pipeline`: chunks -> records -> shards, counts -> `counts_path`."""
  prefix, template, suffix = _sink_naming(plan.paths[0], len(plan.paths), gzip)
  outputs = (
      pipeline
      | "Chunks" >> beam.Create(list(enumerate(plan.chunks)))
      # Spreads the chunks over the workers (Create alone may keep them in one bundle).
      | "Spread" >> beam.Reshuffle()
      | "Instances" >> beam.ParDo(_ChunkToRecords(settings, vocab_file)).with_outputs(
          _COUNTS, main="records"))
  _ = outputs.records | "Write" >> beam.io.WriteToTFRecord(
      prefix, file_name_suffix=suffix, num_shards=len(plan.paths),
      shard_name_template=template,
      compression_type=CompressionTypes.GZIP if gzip else CompressionTypes.UNCOMPRESSED)
  _ = (outputs[_COUNTS]
       | "Merge" >> beam.CombineGlobally(_merge_all)
       | "Json" >> beam.Map(json.dumps)
       | "Counts" >> beam.io.WriteToText(counts_path, shard_name_template=""))


def create_pretraining_data(input_file: str, vocab_file: str, output: str,
                            settings: cpd.PretrainingDataSettings = cpd.PretrainingDataSettings(),
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
    PretrainingDataError: bad input, vocab, settings or an existing output (found before
      the pipeline starts, with the local tool's messages), or a failed pipeline.
  """
  plan = cpd.plan_run(input_file, vocab_file, output, settings, num_shards, gzip, overwrite,
                      chunk_size_mb)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  files_lib.make_dirs(os.path.dirname(plan.paths[0]) or ".")
  counts_path = f"{plan.summary_file}.counts-{uuid.uuid4().hex[:12]}"
  options = beam_options.PipelineOptions(list(pipeline_args or []) + [f"--runner={runner}"])
  start = time.time()
  try:
    try:
      pipeline = beam.Pipeline(options=options)
      build_pipeline(pipeline, plan, vocab_file, settings, gzip, counts_path)
      pipeline.run().wait_until_finish()
    except Exception as e:  # pylint: disable=broad-except
      # The runner wraps a worker's exception; its text keeps the file named.
      raise cpd.PretrainingDataError(f"The pipeline failed: {e}") from e
    with tf.io.gfile.GFile(counts_path) as f:
      totals = json.loads(f.read())
    cpd.check_totals(totals, plan.files)
  except BaseException:
    # Shards already renamed by a finished pipeline whose totals are refused.
    for p in plan.paths + [counts_path]:
      if tf.io.gfile.exists(p):
        tf.io.gfile.remove(p)
    raise
  tf.io.gfile.remove(counts_path)
  elapsed = time.time() - start
  summary = cpd.make_summary(totals, settings, plan.files, vocab_file,
                             plan.special.vocab_size, plan.paths, gzip, None, chunk_size_mb,
                             elapsed, 0.0, [], runner=runner)
  with files_lib.atomic_open(plan.summary_file) as f:
    json.dump(summary, f, indent=2)
  return summary
