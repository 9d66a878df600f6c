"""The JSON summary of a pretraining data run, and the counts it is made from.

Each chunk's work adds to a dict of counts (`empty_stats`); the runner merges them
(`merge_stats`) and writes `make_summary`'s dict beside the shards: masking and
next-sentence statistics, the input, the vocab's SHA-256, the settings and the timings.
"""

import hashlib
from typing import Dict, Sequence

from bert_tf import constants
from bert_tf.data.records import pretraining_format as fmt
from bert_tf.utils import files as files_lib
from bert_tf.data.creation import pretraining_instances as pi

_STAT_KEYS = ("chunks", "bytes", "lines", "documents", "sentences", "instances", "tokens",
              "non_special_tokens", "masked", pi.MASKED, pi.RANDOM, pi.KEPT, "random_next",
              "single_sentence_chunks", "short_target_instances", "document_passes",
              "short_target_passes", "truncated_instances", "invalid_utf8_replacements",
              "max_token_id", "cpu_seconds")


def empty_stats() -> Dict[str, int]:
  """Zero counts under the keys that chunks report and the summary is made from."""
  return {k: 0 for k in _STAT_KEYS}


def merge_stats(into: Dict[str, int], other: Dict[str, int]):
  """Adds `other`'s counts to `into` (the largest token id is kept, not added)."""
  for k in _STAT_KEYS:
    into[k] = max(into[k], other[k]) if k == "max_token_id" else into[k] + other[k]


def check_totals(totals: Dict[str, int], files: Sequence[str]):
  """Raises PretrainingDataError when the whole input made no documents or instances."""
  if totals["documents"] == 0:
    raise fmt.PretrainingDataError(f"No documents in the input (every line is blank or "
                                   f"tokenizes to nothing): {', '.join(files)}")
  if totals["instances"] == 0:
    raise fmt.PretrainingDataError(f"No instances could be made from {', '.join(files)}")


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
      "vocab_file": files_lib.absolute_path(vocab_file),
      "vocab_sha256": _vocab_sha256(vocab_file),
      "settings": settings.as_dict(),
      "seq_length": settings.max_seq_length,
      "max_predictions_per_seq": settings.max_predictions_per_seq,
      "feature_names": list(constants.TFRECORD_TO_MODEL_INPUT),
      "input_files": [files_lib.absolute_path(f) for f in files],
      "output_files": [files_lib.absolute_path(p) for p in paths],
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


def _vocab_sha256(vocab_file: str) -> str:
  with files_lib.open_input(vocab_file) as f:
    return hashlib.sha256(f.read()).hexdigest()

