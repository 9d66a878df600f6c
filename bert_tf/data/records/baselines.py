"""Baselines that ignore the input, to tell what pretraining learned from the text.

unigram masked-LM baseline: always predict the token most often masked in the training
  data; its accuracy on held-out data is that token's share of the held-out masked
  positions.
next-sentence majority baseline: always predict the more frequent training label.
"""

import collections
import dataclasses
from typing import Counter, Tuple

import numpy as np
import tensorflow as tf

from bert_tf import constants
from bert_tf.data.records import pretraining_files
from bert_tf.data.records import record_specs
from bert_tf.data.records import tfrecords


@dataclasses.dataclass(frozen=True)
class LabelCounts:
  """How often each token was masked and each next-sentence label occurs."""

  masked_tokens: Counter
  next_sentence_labels: Counter


@dataclasses.dataclass(frozen=True)
class Baselines:
  """Accuracies on held-out data of predictions that ignore the input."""

  unigram_token_id: int
  unigram_masked_lm_accuracy: float
  majority_next_sentence_label: int
  majority_next_sentence_accuracy: float


def count_labels(input_path: str, compression_type: str = "",
                 batch_size: int = 1024) -> LabelCounts:
  """Counts the masked tokens (weight > 0) and next-sentence labels of pretraining files.

  Args:
    input_path: comma-separated globs of pretraining TFRecords.
    compression_type: "", "GZIP" or "ZLIB".
    batch_size: records parsed per batch.
  """
  info = pretraining_files.inspect_pretraining_files(input_path, compression_type)
  spec = tuple(f for f in record_specs.pretraining_spec(info.seq_length,
                                                        info.max_predictions_per_seq)
               if f.key in (constants.MASKED_LM_IDS, constants.MASKED_LM_WEIGHTS,
                            constants.NEXT_SENTENCE_LABELS))
  dataset = tf.data.TFRecordDataset(info.files, compression_type=compression_type)
  dataset = dataset.batch(batch_size).map(lambda records: tfrecords.parse_records(records,
                                                                                  spec))
  masked: Counter = collections.Counter()
  labels: Counter = collections.Counter()
  for batch in dataset.as_numpy_iterator():
    ids = batch[constants.MASKED_LM_IDS]
    weights = batch[constants.MASKED_LM_WEIGHTS]
    masked.update(ids[weights > 0].tolist())
    labels.update(np.ravel(batch[constants.NEXT_SENTENCE_LABELS]).tolist())
  return LabelCounts(masked_tokens=masked, next_sentence_labels=labels)


def _most_common(counts: Counter, what: str, path: str) -> Tuple[int, int]:
  if not counts:
    raise ValueError(f"No {what} in {path}")
  return counts.most_common(1)[0]


def input_blind_baselines(train_path: str, heldout_path: str,
                          compression_type: str = "") -> Baselines:
  """The unigram and majority baselines: chosen on train_path, scored on heldout_path."""
  train = count_labels(train_path, compression_type)
  heldout = count_labels(heldout_path, compression_type)
  token, _ = _most_common(train.masked_tokens, "masked tokens", train_path)
  label, _ = _most_common(train.next_sentence_labels, "next-sentence labels", train_path)
  heldout_masked = sum(heldout.masked_tokens.values())
  heldout_pairs = sum(heldout.next_sentence_labels.values())
  if not heldout_masked:
    raise ValueError(f"No masked tokens in {heldout_path}")
  return Baselines(
      unigram_token_id=int(token),
      unigram_masked_lm_accuracy=heldout.masked_tokens[token] / heldout_masked,
      majority_next_sentence_label=int(label),
      majority_next_sentence_accuracy=heldout.next_sentence_labels[label] / heldout_pairs)
