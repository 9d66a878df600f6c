"""What the export benchmarks measure of exported classifiers: size on disk, GLUE dev
accuracy through their token-ids signature, and that signature's latency."""

import os
from typing import Callable, Dict

from bench import common
from bench import driver
from bench import stats


def directory_bytes(path: str) -> int:
  """Total size of the files under `path` (a SavedModel's size on disk)."""
  return sum(os.path.getsize(os.path.join(root, name))
             for root, _, names in os.walk(path) for name in names)


def classifier_dev_accuracy(signatures: Dict[str, Callable], experiment, glue_task: str,
                            batch_size: int = 32, max_examples: int = 0) -> Dict[str, float]:
  """Dev accuracy (percent) of classifier exports on <data_dir>/glue_<task>/dev.tsv.

  Args:
    signatures: {name: an export's serve_token_ids signature}; all share the vocab and
      the packing of `experiment`.
    experiment: the sentence_prediction experiment whose eval_data reader packs dev.tsv.
    glue_task: e.g. "sst2".
    batch_size: examples per call.
    max_examples: stop after at least this many examples (0: the whole dev set).

  Returns:
    {name: accuracy in percent}, and "dev_examples": the number scored.
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import base  # pylint: disable=g-import-not-at-top
  dev = experiment.override({"eval_data": {
      "input_path": common.data_path(f"glue_{glue_task}", "dev.tsv"), "format": "tsv",
      "global_batch_size": batch_size, "is_training": False, "drop_remainder": False}})
  task = base.get_task(dev)
  correct, count = {name: 0 for name in signatures}, 0
  for batch in task.data_loader(dev.eval_data).dataset():
    inputs = {k: batch[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    labels = batch["label_ids"].numpy()
    for name, signature in signatures.items():
      predicted = np.argmax(signature(**inputs)["probabilities"].numpy(), axis=-1)
      correct[name] += int(np.sum(predicted == labels))
    count += len(labels)
    if max_examples and count >= max_examples:
      break
  return {**{name: 100.0 * correct[name] / count for name in signatures},
          "dev_examples": count}


def token_ids_latency_ms(signatures: Dict[str, Callable], vocab_size: int, seq_length: int,
                         rounds: Dict[int, int]) -> Dict[str, Dict[int, float]]:
  """Median milliseconds per call of serve_token_ids signatures, interleaved.

  Args:
    signatures: {name: serve_token_ids signature}.
    vocab_size: random ids are drawn from [5, vocab_size).
    seq_length: T of every row (no padding).
    rounds: {batch size: timed rounds}; two untimed rounds warm each batch size up.

  Returns:
    {name: {batch size: median ms}}.
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  largest = max(rounds)
  ids = {"input_word_ids": rng.integers(5, vocab_size, (largest, seq_length)),
         "input_mask": np.ones((largest, seq_length)),
         "input_type_ids": np.zeros((largest, seq_length))}
  ids = {k: tf.constant(v, tf.int32) for k, v in ids.items()}
  result = {name: {} for name in signatures}
  for batch, count in rounds.items():
    sliced = {k: v[:batch] for k, v in ids.items()}
    calls = {name: (lambda s=signature: s(**sliced)["probabilities"].numpy())
             for name, signature in signatures.items()}
    driver.interleaved_times(calls, 2)
    times = driver.interleaved_times(calls, count)
    for name in signatures:
      result[name][batch] = 1000 * stats.median(times[name])
  return result
