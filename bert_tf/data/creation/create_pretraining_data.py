"""Creates pretraining TFRecords from raw text, as the original BERT release's tool does.

Input: text files with one sentence per line and a blank line between documents.
Output: sharded TFRecords of `tf.train.Example`s with the original release's features
(`input_ids`, `input_mask`, `segment_ids`, `masked_lm_positions`, `masked_lm_ids`,
`masked_lm_weights`, `next_sentence_labels`), plus a JSON summary beside them.

The input is cut into document-aligned chunks of about `chunk_size_mb` (less for an input
too small to give each shard several chunks, see `pretraining_plan.chunk_bytes`); each chunk is read,
tokenized, turned into instances, shuffled and written on its own, so memory is bounded by
one chunk, and chunks spread over worker processes. A random next segment comes from
another document of the same chunk. Each chunk's random draws are seeded by
(random_seed, chunk index), and chunk i's instances go, in their shuffled order, to shard
i mod num_shards after those of the shard's earlier chunks. The files are therefore a
function of the input, the settings, the chunk size and the shard count alone: any number
of workers, and the Beam pipeline on any runner, writes identical files.

This module is the local runner: worker processes, each writing its own shards, and the
progress line. The work itself is spread by concern: `pretraining_format` (settings,
file names), `pretraining_inputs` (input files, text check, vocab), `pretraining_plan`
(chunks), `pretraining_chunks` (one chunk's work) and `pretraining_summary` (counts and
the JSON summary).
"""

import json
import multiprocessing
import os
import sys
import time
import traceback
from typing import Callable, Dict, Optional, Sequence

from bert_tf.data.creation import pretraining_chunks as chunks_lib
from bert_tf.data.records import pretraining_format as fmt
from bert_tf.data.creation import pretraining_inputs as inputs
from bert_tf.data.creation import pretraining_plan as plan_lib
from bert_tf.data.creation import pretraining_summary as summary_lib
from bert_tf.utils import errors
from bert_tf.utils import files as files_lib
from bert_tf.utils import progress as progress_lib


class _ShardWriters:
  """Writers of some shards (shard index -> path), each to a temporary name until closed."""

  def __init__(self, paths: Dict[int, str], gzip: bool):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    options = tf.io.TFRecordOptions(compression_type="GZIP" if gzip else "")
    self._writers = {s: tf.io.TFRecordWriter(p + fmt.INCOMPLETE_SUFFIX, options)
                     for s, p in paths.items()}

  def write(self, shard: int, records: Sequence[bytes]):
    writer = self._writers[shard]
    for record in records:
      writer.write(record)

  def close(self):
    for w in self._writers.values():
      w.close()


def _run_worker(worker_index: int, num_workers: int, chunks: Sequence[plan_lib.Chunk],
                shard_paths: Sequence[str], gzip: bool, settings: fmt.PretrainingDataSettings,
                vocab_file: str, report: Callable):
  """Writes shards worker_index, worker_index + num_workers, ...: their chunks, in order."""
  special = inputs.load_special_ids(vocab_file)
  tokenize = chunks_lib.make_line_tokenizer(vocab_file, settings.do_lower_case)
  num_shards = len(shard_paths)
  writers = _ShardWriters({s: shard_paths[s] for s in range(worker_index, num_shards,
                                                            num_workers)}, gzip)
  report(("ready", None))
  total = summary_lib.empty_stats()
  try:
    for chunk in chunks:
      shard = plan_lib.shard_of(chunk.index, num_shards)
      if shard % num_workers != worker_index:
        continue
      cpu = time.process_time()
      stats = summary_lib.empty_stats()
      for records in chunks_lib.chunk_records(chunk, settings, special, tokenize, stats):
        writers.write(shard, records)
      stats["cpu_seconds"] = time.process_time() - cpu
      summary_lib.merge_stats(total, stats)
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


def _remove_quietly(path: str):
  try:
    os.remove(path)
  except OSError:
    pass


def create_pretraining_data(input_file: str, vocab_file: str, output: str,
                            settings: Optional[fmt.PretrainingDataSettings] = None,
                            num_shards: int = 1, num_workers: int = 1, gzip: bool = False,
                            overwrite: bool = False, chunk_size_mb: float = 4.0,
                            progress: bool = True) -> Dict:
  """Creates pretraining TFRecords and their JSON summary; the tool's whole work.

  Args:
    input_file: comma-separated globs of text files (one sentence per line, blank line
      between documents).
    vocab_file: WordPiece vocab, one token per line, with [PAD] [UNK] [CLS] [SEP] [MASK].
    output: output prefix (see `pretraining_format.output_paths`); the summary goes to
      `pretraining_format.summary_path(output)`.
    settings: the original tool's settings; None: their defaults.
    num_shards: output files; chunk i's instances go to shard i mod num_shards.
    num_workers: processes; each writes its own shards, so at most num_shards are used.
      The files do not depend on it.
    gzip: GZIP-compress the TFRecords.
    overwrite: replace existing outputs (otherwise they are an error).
    chunk_size_mb: input is processed in document-aligned chunks of about this size (less
      for a small input, see `pretraining_plan.chunk_bytes`).
    progress: print a progress line to stderr every few seconds.

  Returns:
    the summary dict (also written as JSON).

  Raises:
    PretrainingDataError: bad input, vocab or an existing output.
    ConfigError: impossible settings.
  """
  if num_workers < 1:
    raise fmt.PretrainingDataError("num_shards and num_workers must be at least 1")
  settings = settings or fmt.PretrainingDataSettings()
  plan = plan_lib.plan_run(input_file, vocab_file, output, settings, num_shards, gzip,
                           overwrite, chunk_size_mb)
  files, paths = plan.files, plan.paths
  chunks = plan_lib.plan_chunks(files, plan.chunk_bytes, plan.sizes)
  out_dir = os.path.dirname(os.path.abspath(paths[0]))
  files_lib.make_dirs(out_dir)
  workers = max(1, min(num_workers, num_shards, len(chunks)))
  if progress:
    plan_lib.note_empty_shards(len(chunks), num_shards)
  if progress and workers < num_workers:
    print(f"[create_pretraining_data] using {workers} worker(s): each worker writes its own "
          f"shards and there are {num_shards} shard(s) and {len(chunks)} chunk(s)",
          file=sys.stderr)

  start = time.time()
  tracker = _Progress(plan.total_bytes, progress, workers)
  totals = summary_lib.empty_stats()
  worker_cpu_seconds = []
  try:
    if workers == 1:
      worker_totals = _run_worker(0, 1, chunks, paths, gzip, settings, vocab_file,
                                  tracker.handle)
      worker_cpu_seconds.append(worker_totals["cpu_seconds"])
      summary_lib.merge_stats(totals, worker_totals)
    else:
      summary_lib.merge_stats(totals, _run_in_processes(workers, chunks, paths, gzip,
                                                        settings, vocab_file, tracker,
                                                        worker_cpu_seconds))
    summary_lib.check_totals(totals, files)
  except BaseException:
    for p in paths:
      _remove_quietly(p + fmt.INCOMPLETE_SUFFIX)
    raise
  for p in paths:
    os.replace(p + fmt.INCOMPLETE_SUFFIX, p)
  elapsed = time.time() - start

  summary = summary_lib.make_summary(totals, settings, files, vocab_file,
                                     plan.special.vocab_size, paths, gzip, workers,
                                     chunk_size_mb, plan.chunk_bytes, elapsed,
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
  totals = summary_lib.empty_stats()
  done = 0
  try:
    while done < workers:
      try:
        kind, payload = queue.get(timeout=1.0)
      except Exception:  # pylint: disable=broad-except
        dead = [p for p in procs if p.exitcode not in (None, 0)]
        if dead:
          raise fmt.PretrainingDataError(f"A worker process died (exit code {dead[0].exitcode})")
        continue
      if kind in ("ready", "progress"):
        tracker.handle((kind, payload))
      elif kind == "done":
        summary_lib.merge_stats(totals, payload)
        worker_cpu_seconds.append(payload["cpu_seconds"])
        done += 1
      elif kind == "user_error":
        raise fmt.PretrainingDataError(payload)
      else:
        raise fmt.PretrainingDataError(f"A worker failed: {payload}")
  finally:
    for p in procs:
      if p.is_alive() and done < workers:
        p.terminate()
      p.join()
  return totals

