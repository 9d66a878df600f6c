"""Input-blind baselines of pretraining data: the unigram and majority predictions."""

import os

import pytest
import tensorflow as tf

from bert_tf.data.records import baselines

SEQ, PREDICTIONS = 8, 3


def _example(masked_ids, weights, next_sentence_label):
  def ints(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

  feature = {
      "input_ids": ints([2, 7, 4, 3, 8, 9, 3, 0]),
      "input_mask": ints([1] * 7 + [0]),
      "segment_ids": ints([0, 0, 0, 0, 1, 1, 1, 0]),
      "masked_lm_positions": ints([2, 5, 0]),
      "masked_lm_ids": ints(masked_ids),
      "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=weights)),
      "next_sentence_labels": ints([next_sentence_label]),
  }
  return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _write(path, examples):
  with tf.io.TFRecordWriter(path) as writer:
    for example in examples:
      writer.write(example)
  return path


def test_counts_only_masked_positions_with_weight(tmp_path):
  path = _write(os.path.join(str(tmp_path), "a.tfrecord"), [
      _example([11, 12, 0], [1.0, 1.0, 0.0], 1),
      _example([11, 13, 0], [1.0, 1.0, 0.0], 0),
      _example([11, 0, 0], [1.0, 0.0, 0.0], 1),
  ])
  counts = baselines.count_labels(path)
  assert dict(counts.masked_tokens) == {11: 3, 12: 1, 13: 1}
  assert dict(counts.next_sentence_labels) == {0: 1, 1: 2}


def test_baselines_are_chosen_on_training_data_and_scored_on_heldout_data(tmp_path):
  train = _write(os.path.join(str(tmp_path), "train.tfrecord"), [
      _example([11, 11, 12], [1.0, 1.0, 1.0], 1),
      _example([11, 13, 0], [1.0, 1.0, 0.0], 1),
      _example([12, 0, 0], [1.0, 0.0, 0.0], 0),
  ])
  # Held out, token 12 is the most frequent; the baseline still predicts 11.
  heldout = _write(os.path.join(str(tmp_path), "heldout.tfrecord"), [
      _example([12, 12, 11], [1.0, 1.0, 1.0], 0),
      _example([12, 13, 0], [1.0, 1.0, 0.0], 1),
  ])
  result = baselines.input_blind_baselines(train, heldout)
  assert result.unigram_token_id == 11
  assert result.unigram_masked_lm_accuracy == pytest.approx(1 / 5)
  assert result.majority_next_sentence_label == 1
  assert result.majority_next_sentence_accuracy == pytest.approx(1 / 2)


def test_heldout_data_without_masked_tokens_is_an_error_naming_it(tmp_path):
  train = _write(os.path.join(str(tmp_path), "train.tfrecord"),
                 [_example([11, 0, 0], [1.0, 0.0, 0.0], 1)])
  heldout = _write(os.path.join(str(tmp_path), "empty_masks.tfrecord"),
                   [_example([0, 0, 0], [0.0, 0.0, 0.0], 1)])
  with pytest.raises(ValueError, match="empty_masks.tfrecord"):
    baselines.input_blind_baselines(train, heldout)
