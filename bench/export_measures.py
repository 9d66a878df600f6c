"""What the serving benchmark measures of exported classifiers (bert_tf's exports and the
serving stacks beside them): size on disk, the GLUE token ids they all score, and, from
the log-probabilities and round times the workers return, agreement with bert_tf's
float32 export, dev accuracy, latency and throughput (plain Python and numpy, so that
a fast test checks them)."""

import os
from typing import Dict, Optional, Sequence

import numpy as np

from bench import common
from bench import stats

REFERENCE = "float32"
# Each system's precision: a bert_tf export kind (exporter.QUANTIZE_MODES, float32) or a
# peer variant (bench/peers/cpu_serving.py), named <stack>_<variant>.
PRECISIONS = {"float32": "float32", "int8": "int8", "int8_dynamic": "int8",
              "int8_onednn": "int8", "bfloat16": "bf16", "float32_text": "float32, text in",
              "onnxruntime_float32": "float32", "onnxruntime_optimized": "float32",
              "onnxruntime_int8_dynamic": "int8", "onnxruntime_int8_static": "int8",
              "openvino_float32": "float32", "openvino_bf16": "bf16", "openvino_int8": "int8"}
PEER_STACKS = ("onnxruntime_", "openvino_")
# Largest log-probability difference from bert_tf's float32 export at which a float32
# system counts as the same model on the same ids.
FLOAT32_TOLERANCE = 1e-4


def is_peer(name: str) -> bool:
  return name.startswith(PEER_STACKS)


def directory_bytes(path: str) -> int:
  """Total size of the files under `path` (a SavedModel's size on disk)."""
  return sum(os.path.getsize(os.path.join(root, name))
             for root, _, names in os.walk(path) for name in names)


def glue_token_ids(experiment, glue_task: str, split: str = "dev", max_examples: int = 0,
                   batch_size: int = 32) -> Dict[str, np.ndarray]:
  """The packed rows of <data_dir>/glue_<task>/<split>.tsv, in file order.

  Args:
    experiment: a sentence_prediction experiment whose eval_data reader packs the file.
    glue_task: e.g. "sst2".
    split: "dev" or "train".
    max_examples: at most this many rows (0: the whole file).
    batch_size: rows per read.

  Returns:
    {input_word_ids, input_mask, input_type_ids: int32 [N, eval_data.seq_length],
    labels: int32 [N]}.
  """
  from bert_tf.data.pipelines import padding  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import base  # pylint: disable=g-import-not-at-top
  config = experiment.override({"task": {"glue_task": glue_task}, "eval_data": {
      "input_path": common.data_path(f"glue_{glue_task}", f"{split}.tsv"), "format": "tsv",
      "global_batch_size": batch_size, "is_training": False, "drop_remainder": False}})
  keys = ("input_word_ids", "input_mask", "input_type_ids", "label_ids")
  parts = {key: [] for key in keys}
  count = 0
  # The reader pads each batch to its longest row; every batch goes to seq_length.
  seq_length = padding.bucket_lengths([config.eval_data.seq_length])
  loader = base.get_task(config).data_loader(config.eval_data)
  for batch in loader.dataset():
    batch = padding.pad_batch_to_bucket({key: batch[key].numpy() for key in keys}, seq_length,
                                        loader.token_fills())
    for key in keys:
      parts[key].append(batch[key].astype(np.int32))
    count += len(parts["label_ids"][-1])
    if max_examples and count >= max_examples:
      break
  rows = {key: np.concatenate(parts[key])[:max_examples or None] for key in keys}
  rows["labels"] = rows.pop("label_ids")
  return rows


def accuracy(log_probs: np.ndarray, labels: np.ndarray) -> float:
  """Percent of rows whose largest log-probability [N, C] is at their label [N]."""
  return 100.0 * float(np.mean(np.argmax(log_probs, axis=-1) == labels))


def max_difference(log_probs: np.ndarray, reference: np.ndarray) -> float:
  """The largest absolute difference of two systems' log-probabilities [N, C]."""
  return float(np.max(np.abs(np.asarray(log_probs, np.float64) - reference)))


def serving_summary(rounds: Dict[str, Dict[int, Sequence[Sequence[float]]]],
                    scores: Dict[str, Dict[str, np.ndarray]],
                    labels: Optional[np.ndarray] = None) -> Dict[str, dict]:
  """Each system's figures from one interleaved run.

  Args:
    rounds: {system: {batch size: per-round lists of seconds per call}}; every system
      ran the same rounds, and REFERENCE (bert_tf's float32 export) is one of them.
    scores: {system: {"agreement_log_probs": float32 [N, C], and with a GLUE task
      "dev_log_probs" [M, C]}}; a system absent from it is only timed.
    labels: int [M], the dev labels (None: no accuracy).

  Returns:
    {system: {"batch<B>_ms" median ms per call, "batch<B>_p99_ms", "batch<B>_per_second"
    rows per second, "speed_vs_float32" {B: {"ratio", "interval"}}: the reference's
    median call over this one's with its bootstrap interval over rounds,
    "max_log_prob_difference" from the reference, "agrees" (float32 systems: within
    FLOAT32_TOLERANCE), "dev_accuracy" and "dev_examples" when labels are given}}.
  """
  reference = scores[REFERENCE]["agreement_log_probs"]
  summary = {}
  for name, by_batch in rounds.items():
    row = {"speed_vs_float32": {}}
    for batch, system_rounds in by_batch.items():
      calls = [s for r in system_rounds for s in r]
      row[f"batch{batch}_ms"] = 1000 * stats.median(calls)
      row[f"batch{batch}_p99_ms"] = 1000 * stats.quantile(calls, 0.99)
      row[f"batch{batch}_per_second"] = batch / stats.median(calls)
      row["speed_vs_float32"][batch] = stats.ratio_with_interval(
          system_rounds, rounds[REFERENCE][batch])
    if name not in scores:  # raw text in: timed only
      summary[name] = row
      continue
    row["max_log_prob_difference"] = max_difference(
        scores[name]["agreement_log_probs"], reference)
    if PRECISIONS.get(name) == "float32":
      row["agrees"] = row["max_log_prob_difference"] <= FLOAT32_TOLERANCE
    if labels is not None:
      row["dev_accuracy"] = accuracy(scores[name]["dev_log_probs"], labels)
      row["dev_examples"] = len(labels)
    summary[name] = row
  return summary


def best_peer_ratios(summary: Dict[str, dict], batch: int) -> Dict[str, dict]:
  """For each bert_tf system, its speed over the fastest peer of its precision at
  `batch` (the peer's median call over ours): {ours: {"peer", "ratio"}}; systems
  without a peer of their precision are left out."""
  result = {}
  key = f"batch{batch}_ms"
  for name, row in summary.items():
    if is_peer(name):
      continue
    peers = [p for p in summary if is_peer(p) and PRECISIONS.get(p) == PRECISIONS.get(name)]
    if peers:
      best = min(peers, key=lambda p: summary[p][key])
      result[name] = {"peer": best, "ratio": summary[best][key] / row[key]}
  return result


def summary_table(summary: Dict[str, dict], sizes_mb: Dict[str, float], batch: int) -> str:
  """The run as a markdown table: one row per system, bert_tf's first."""
  header = ["system", "precision", "model MB", "max |Δ log p| vs float32", "SST-2 dev",
            "batch 1 ms (p99)", "x float32 [95% CI]", f"batch {batch} seq/s",
            "x float32 [95% CI]"]
  rows = []
  for name in sorted(summary, key=is_peer):
    row = summary[name]
    ratios = [stats.format_interval(r["ratio"], r["interval"])
              for r in (row["speed_vs_float32"][1], row["speed_vs_float32"][batch])]
    difference = (f"{row['max_log_prob_difference']:.1e}"
                  if "max_log_prob_difference" in row else "-")
    if row.get("agrees") is False:
      difference += f" (over {FLOAT32_TOLERANCE:g})"
    precision = PRECISIONS.get(name, "?")
    ran = row.get("info", {}).get("precision")  # OpenVINO's: f32 where the CPU lacks bf16
    rows.append([name, f"{precision} (ran {ran})" if precision == "bf16" and ran not in
                 (None, "bf16") else precision,
                 f"{sizes_mb.get(name, float('nan')):.1f}",
                 difference, f"{row['dev_accuracy']:.2f}" if "dev_accuracy" in row else "-",
                 f"{row['batch1_ms']:.1f} ({row['batch1_p99_ms']:.1f})", ratios[0],
                 f"{row[f'batch{batch}_per_second']:.1f}", ratios[1]])
  return common.markdown_table(header, rows)
