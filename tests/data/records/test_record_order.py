"""The one order of the records: what RecordOrder gives, and that both engines' inputs
(tf.data, bert_tf.data.records.tfrecords.ordered_record_dataset; the host input,
bert_tf.data.pipelines.host_pipeline) read the same records in the same order, with the same
dynamic masks."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import host_input_helpers as helpers
import paths as paths_lib
import pretraining_fixtures as fx
from bert_tf import configs
from bert_tf import constants
from bert_tf.data.pipelines import host_pipeline
from bert_tf.data.pipelines import masking
from bert_tf.data.pipelines import pretraining_reader
from bert_tf.data.records import record_order
from bert_tf.data.records import record_specs

SPEC = record_specs.pretraining_spec(helpers.SEQ, helpers.PRED)
BATCH = 8


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
  return helpers.write_pretraining_files(tmp_path_factory.mktemp("order"), num_files=3)


def _order(counts=(10, 0, 7, 13), batch=4, **kw):
  return record_order.RecordOrder(counts, batch, **dict(dict(repeat=True), **kw))


def test_an_unshuffled_order_reads_the_rows_in_file_order_epoch_after_epoch():
  order = _order(shuffle_window=1)
  rows = np.concatenate([order.rows(n) for n in range(15)])
  np.testing.assert_array_equal(rows, np.arange(60) % 30)


@pytest.mark.parametrize("window", [3, 8, 30, 1000])
def test_each_shuffled_epoch_reads_every_row_once_in_a_new_order(window):
  order = _order(shuffle_window=window, batch=5, seed=3)
  rows = np.concatenate([order.rows(n) for n in range(12)]).reshape(2, 30)
  for epoch in rows:
    assert sorted(epoch) == list(range(30))
  assert list(rows[0]) != list(rows[1]) and list(rows[0]) != list(range(30))
  again = _order(shuffle_window=window, batch=5, seed=3)
  np.testing.assert_array_equal(np.concatenate([again.rows(n) for n in range(12)]),
                                rows.reshape(-1))
  other = _order(shuffle_window=window, batch=5, seed=4)
  assert list(np.concatenate([other.rows(n) for n in range(6)])) != list(rows[0])


def test_a_shuffle_window_mixes_rows_of_one_window_of_the_files_stream_only():
  order = record_order.RecordOrder([100, 100], 10, shuffle_window=10, seed=1, repeat=True)
  for n in range(20):
    rows = order.rows(n)
    # A window of 10 rows lies inside one file here, and holds 10 consecutive records.
    assert rows.max() - rows.min() == 9 and len(set(rows // 100)) == 1


@pytest.mark.parametrize("parts", [2, 4])
def test_the_parts_of_a_global_batch_are_its_rows_however_it_is_shared(parts):
  order = _order(shuffle_window=7, batch=8, seed=2)
  for n in range(9):
    shared = np.stack([order.rows(n, part, parts) for part in range(parts)], axis=1)
    np.testing.assert_array_equal(shared.reshape(-1), order.rows(n))


def test_one_pass_ends_with_a_short_batch_and_parts_without_rows_are_not_batches():
  order = record_order.RecordOrder([5, 6], 4, drop_remainder=False)
  assert order.num_batches == 3
  np.testing.assert_array_equal(order.rows(2), [8, 9, 10])
  np.testing.assert_array_equal(order.rows(2, 1, 2), [9])
  assert [order.num_part_batches(part, 4) for part in range(4)] == [3, 3, 3, 2]
  assert record_order.RecordOrder([5, 6], 4, drop_remainder=True).num_batches == 2


def test_training_shuffles_and_repeats_and_evaluation_reads_one_pass_in_file_order():
  train = configs.DataConfig(shuffle_buffer_size=64, drop_remainder=True)
  evaluation = configs.DataConfig(is_training=False, shuffle_buffer_size=64,
                                  drop_remainder=False)
  assert record_order.settings(train) == dict(shuffle_window=64, repeat=True,
                                              drop_remainder=True)
  assert record_order.settings(evaluation) == dict(shuffle_window=0, repeat=False,
                                                   drop_remainder=False)
  assert host_pipeline.data_order(evaluation, 1, 2, seed=3) == (16, dict(
      shuffle_window=0, repeat=False, drop_remainder=False, seed=3, process_index=1,
      process_count=2))
  assert (train.section_name(), evaluation.section_name()) == ("train_data", "eval_data")


def _host(paths, config, seed, process, processes, vocab=""):
  batch_size, order = host_pipeline.data_order(config, process, processes, seed)
  draw = masking.DynamicMasking.of(config, vocab, seed) if config.dynamic_masking else None
  return host_pipeline.record_batches(paths, SPEC, batch_size, num_threads=0, draw=draw,
                                      **order)


def _rows(batch):
  return [tuple(row) for row in np.asarray(batch[constants.INPUT_WORD_IDS]).tolist()]


@pytest.mark.parametrize("num_files, window, seed, processes, dynamic_masking", [
    (3, 10000, 0, 1, False), (3, 16, 5, 2, False), (2, 0, 1, 2, False),
    (1, 5, 2, 4, False), (3, 3, 7, 4, False), (3, 10000, 4, 2, True)])
def test_both_engines_read_the_same_records_in_the_same_order(
    shards, tmp_path, num_files, window, seed, processes, dynamic_masking):
  paths, counts = shards
  paths = paths[:num_files]
  vocab = fx.write_vocab(tmp_path)
  config = configs.DataConfig(input_path=",".join(paths), global_batch_size=BATCH,
                              seq_length=helpers.SEQ, max_predictions_per_seq=helpers.PRED,
                              shuffle_buffer_size=window, dynamic_masking=dynamic_masking,
                              whole_word_masking=dynamic_masking)
  steps = sum(counts[:num_files]) // BATCH + 2  # Into the second epoch.
  one_pipeline = iter(pretraining_reader.build_pretraining_dataset(
      config, tf.distribute.InputContext(1, 0, processes), vocab, seed=seed))
  for process in range(processes):
    host = _host(paths, config, seed, process, processes, vocab)
    # One tf.data pipeline per process (multi-worker), and one for every replica.
    tf_data = iter(pretraining_reader.build_pretraining_dataset(
        config, tf.distribute.InputContext(processes, process, processes), vocab,
        seed=seed))
    for step in range(steps):
      ours, theirs = next(host), next(tf_data)
      for key in ours:
        np.testing.assert_array_equal(ours[key], theirs[key].numpy(), err_msg=key)
  shared = [_host(paths, config, seed, p, processes, vocab) for p in range(processes)]
  for step in range(steps):
    for process in range(processes):
      assert _rows(next(one_pipeline)) == _rows(next(shared[process]))


def test_the_tf_data_input_starts_at_a_batch_without_reading_the_ones_before(shards):
  paths, _ = shards
  config = configs.DataConfig(input_path=",".join(paths), global_batch_size=BATCH,
                              seq_length=helpers.SEQ, max_predictions_per_seq=helpers.PRED)
  whole = list(pretraining_reader.build_pretraining_dataset(config).take(9))
  started = list(pretraining_reader.build_pretraining_dataset(config, start=6).take(3))
  assert [_rows(b) for b in started] == [_rows(b) for b in whole[6:]]


_EXIT_WITH_A_LIVE_ITERATOR = """
import sys
from bert_tf import configs
from bert_tf.data.pipelines import pretraining_reader
config = configs.DataConfig(input_path=sys.argv[1], global_batch_size=64, seq_length={seq},
                            max_predictions_per_seq={pred}, dynamic_masking=True,
                            whole_word_masking=True)
iterator = iter(pretraining_reader.build_pretraining_dataset(config, vocab_file=sys.argv[2]))
for _ in range(20):
  next(iterator)
print("read")
"""


@pytest.mark.slow  # fresh processes importing TensorFlow
def test_a_process_exits_while_its_tf_data_input_runs_python_stages(shards, tmp_path):
  paths, _ = shards
  code = _EXIT_WITH_A_LIVE_ITERATOR.format(seq=helpers.SEQ, pred=helpers.PRED)
  env = dict(os.environ, PYTHONPATH=paths_lib.ROOT, TF_CPP_MIN_LOG_LEVEL="2")
  for _ in range(4):
    result = subprocess.run([sys.executable, "-c", code, ",".join(paths),
                             fx.write_vocab(tmp_path)], env=env, capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0 and result.stdout.strip() == "read", result.stderr[-2000:]


def _group_sorted_batches(plain_rows, groups, batch_size):
  """The batches of G rows of a window's rows (shuffled order) stably sorted by group."""
  ordered = plain_rows[np.argsort(groups[plain_rows], kind="stable")]
  return {tuple(ordered[k:k + batch_size]) for k in range(0, len(ordered), batch_size)}


def test_grouped_rows_keep_each_window_s_rows_and_batch_them_group_by_group():
  groups = np.arange(50) % 3
  plain = record_order.RecordOrder([20, 30], 5, shuffle_window=10, seed=4, repeat=True)
  grouped = record_order.RecordOrder([20, 30], 5, shuffle_window=10, seed=4, repeat=True,
                                     row_groups=groups)
  for epoch_start in (0, 50):
    for window in range(5):
      positions = np.arange(epoch_start + 10 * window, epoch_start + 10 * (window + 1))
      rows, plain_rows = grouped.rows_at(positions), plain.rows_at(positions)
      assert sorted(rows) == sorted(plain_rows)
      # Each batch is a run of the window's rows in group order (the shuffled order
      # kept within a group); only the order of the window's batches is drawn.
      batches = {tuple(rows[k:k + 5]) for k in (0, 5)}
      assert batches == _group_sorted_batches(plain_rows, groups, 5)


def test_grouped_batches_are_not_read_shortest_first():
  rng = np.random.default_rng(0)
  groups = rng.integers(0, 6, size=4000)
  order = record_order.RecordOrder([4000], 8, shuffle_window=400, seed=1, repeat=True,
                                   row_groups=groups)
  first_groups = [groups[order.rows(b)] for b in range(50)]  # one window: 50 batches
  assert all(len(set(batch)) <= 2 for batch in first_groups)  # batches of one length
  starts = [int(batch[0]) for batch in first_groups]
  assert starts != sorted(starts)
  # Both engines' readers ask by batch number: the same batch is the same rows.
  np.testing.assert_array_equal(order.rows(7), order.rows_at(7 * 8 + np.arange(8)))


def test_grouped_windows_that_share_batches_keep_those_rows_in_place():
  groups = np.arange(130) % 4
  plain = record_order.RecordOrder([130], 8, shuffle_window=50, seed=3, repeat=True)
  grouped = record_order.RecordOrder([130], 8, shuffle_window=50, seed=3, repeat=True,
                                     row_groups=groups)
  # Window 1 covers positions 50-99: 6 rows of batch 6, batches 7-11 whole, 4 of batch 12.
  positions = np.arange(50, 100)
  rows, plain_rows = grouped.rows_at(positions), plain.rows_at(positions)
  ordered = plain_rows[np.argsort(groups[plain_rows], kind="stable")]
  np.testing.assert_array_equal(rows[:6], ordered[:6])
  np.testing.assert_array_equal(rows[-4:], ordered[-4:])
  middle = {tuple(rows[k:k + 8]) for k in range(6, 46, 8)}
  assert middle == {tuple(ordered[k:k + 8]) for k in range(6, 46, 8)}

