"""The host input (grain, no TensorFlow in the pipeline): the tf.data path's batches,
sharding over processes, the checkpointable position, seeded shuffling, length buckets."""

import json

import numpy as np
import pytest

import host_input_helpers as helpers
from bert_tf import configs
from bert_tf import constants
from bert_tf.data.pipelines import batching
from bert_tf.data.pipelines import host_pipeline
from bert_tf.data.pipelines import padding
from bert_tf.data.pipelines import pretraining_reader
from bert_tf.data.records import record_specs
from bert_tf.data.records import tfrecords

SPEC = record_specs.pretraining_spec(helpers.SEQ, helpers.PRED)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
  return helpers.write_pretraining_files(tmp_path_factory.mktemp("pretraining"))


@pytest.fixture(scope="module")
def finetuning_files(tmp_path_factory):
  directory = tmp_path_factory.mktemp("finetuning")
  return {name: helpers.write_finetuning_file(directory, name)
          for name in helpers.FINETUNING_KINDS}


def _batches(iterator, count=None):
  out = []
  for batch in iterator:
    out.append(batch)
    if count is not None and len(out) == count:
      break
  return out


def _assert_same_batches(ours, theirs):
  assert len(ours) == len(theirs)
  for a, b in zip(ours, theirs):
    assert set(a) == set(b)
    for key in b:
      b_value = np.asarray(b[key])
      assert a[key].dtype == b_value.dtype, key
      np.testing.assert_array_equal(a[key], b_value, err_msg=key)


def _rows(batches, key=constants.INPUT_WORD_IDS):
  return [tuple(row) for batch in batches for row in batch[key].tolist()]


def _training(paths, batch_size=8, **kw):
  args = dict(shuffle_window=10000, repeat=True, seed=3, num_threads=0)
  args.update(kw)
  return host_pipeline.record_batches(paths, SPEC, batch_size, **args)


def test_pretraining_batches_equal_the_tf_data_batches_in_file_order(shards):
  paths, counts = shards
  config = configs.DataConfig(
      input_path=",".join(paths), global_batch_size=8, seq_length=helpers.SEQ,
      max_predictions_per_seq=helpers.PRED, is_training=False, drop_remainder=False)
  theirs = [{k: v.numpy() for k, v in batch.items()}
            for batch in pretraining_reader.build_pretraining_dataset(config)]
  ours = _batches(host_pipeline.record_batches(paths, SPEC, 8, shuffle_window=0, repeat=False,
                                               drop_remainder=False))
  _assert_same_batches(ours, theirs)
  assert sum(len(b[constants.NEXT_SENTENCE_LABELS]) for b in ours) == sum(counts)


@pytest.mark.parametrize("name", list(helpers.FINETUNING_KINDS))
@pytest.mark.parametrize("bounds", [[helpers.FINETUNING_SEQ], [4, 8, helpers.FINETUNING_SEQ]])
def test_finetuning_batches_equal_the_tf_data_batches_padded_to_their_bucket(
    finetuning_files, name, bounds):
  path = finetuning_files[name]
  config = configs.DataConfig(input_path=path, seq_length=helpers.FINETUNING_SEQ,
                              global_batch_size=6, is_training=False, drop_remainder=False)
  spec = helpers.finetuning_spec(name)
  dataset = tfrecords.read_finetuning_tfrecords(config, spec)
  fills = record_specs.token_fills(spec)
  dataset = dataset.map(lambda batch: batching.pad_to_length_bucket(batch, bounds, fills))
  theirs = [{k: v.numpy() for k, v in batch.items()} for batch in dataset]
  lengths = padding.bucket_lengths(bounds)
  ours = _batches(host_pipeline.record_batches(
      [path], spec, 6, finish=lambda batch: padding.pad_batch_to_bucket(batch, lengths, fills),
      shuffle_window=0, repeat=False, drop_remainder=False))
  _assert_same_batches(ours, theirs)
  widths = {b[constants.INPUT_WORD_IDS].shape[-1] for b in ours}
  assert widths <= set(bounds)
  for batch in ours:
    assert batch[constants.INPUT_MASK].sum(axis=-1).max() <= batch[
        constants.INPUT_MASK].shape[-1]
  if len(bounds) > 1:
    assert len(widths) > 1  # Short batches are not padded to seq_length.


def test_processes_read_disjoint_rows_that_cover_the_data(shards):
  paths, counts = shards
  rows = []
  for index in range(3):
    rows.append(_rows(host_pipeline.record_batches(
        paths, SPEC, 4, shuffle_window=0, repeat=False, drop_remainder=False,
        process_index=index, process_count=3)))
  together = [r for process in rows for r in process]
  assert len(together) == sum(counts)
  everything = _rows(host_pipeline.record_batches(paths, SPEC, 4, shuffle_window=0,
                                                  repeat=False, drop_remainder=False))
  assert sorted(together) == sorted(everything)
  # Training: the processes share each shuffled global batch.
  steps = 4
  shares = [_rows(_batches(_training(paths, 4, process_index=i, process_count=2), steps))
            for i in range(2)]
  whole = _rows(_batches(_training(paths, 8), steps))
  for step in range(steps):
    parts = [share[step * 4:(step + 1) * 4] for share in shares]
    assert not set(parts[0]) & set(parts[1])
    assert sorted(parts[0] + parts[1]) == sorted(whole[step * 8:(step + 1) * 8])


def test_a_restored_position_reads_the_batches_an_uninterrupted_run_reads(shards):
  paths, counts = shards
  steps = sum(counts) // 8 + 3  # Past the end of the first epoch.
  uninterrupted = _batches(_training(paths), steps + 4)
  first = _training(paths, num_threads=2)
  _batches(first, steps)
  state = json.loads(json.dumps(first.get_state()))
  assert state["batches_read"] == steps
  resumed = _training(paths, num_threads=2)
  resumed.set_state(state)
  _assert_same_batches(_batches(resumed, 4), uninterrupted[steps:])


def test_seek_skips_to_a_batch_without_reading_the_ones_before(shards):
  paths, _ = shards
  uninterrupted = _batches(_training(paths), 7)
  resumed = _training(paths)
  resumed.seek(5)
  _assert_same_batches(_batches(resumed, 2), uninterrupted[5:])


def test_the_bucket_of_a_length_is_the_smallest_bound_that_holds_it():
  np.testing.assert_array_equal(padding.bucket_lengths([4, 8, 16]),
                                [4] * 5 + [8] * 4 + [16] * 8)


def test_a_position_restores_under_another_process_count_at_the_same_global_batch(shards):
  paths, _ = shards
  two = [_training(paths, 4, process_index=i, process_count=2) for i in range(2)]
  for iterator in two:
    _batches(iterator, 5)
  one = _training(paths, 8)
  one.set_state(two[0].get_state())
  after = [next(iterator) for iterator in two]
  assert sorted(_rows([next(one)])) == sorted(_rows(after))


def test_a_position_of_another_input_is_refused_naming_what_differs(shards):
  paths, _ = shards
  state = _training(paths).get_state()
  with pytest.raises(host_pipeline.InputStateError, match="seed 3 \\(now 4\\)"):
    _training(paths, seed=4).set_state(state)
  with pytest.raises(host_pipeline.InputStateError, match="num_rows"):
    _training(paths[:2]).set_state(state)


def test_shuffling_is_reproducible_by_seed_and_new_every_epoch(shards):
  paths, counts = shards
  epoch = sum(counts) // 8
  a = _rows(_batches(_training(paths), 2 * epoch))
  assert a == _rows(_batches(_training(paths), 2 * epoch))
  assert a != _rows(_batches(_training(paths, seed=4), 2 * epoch))
  in_order = _rows(host_pipeline.record_batches(paths, SPEC, 8, shuffle_window=0,
                                                repeat=False))
  assert a[:epoch * 8] != in_order[:epoch * 8]
  assert a[:epoch * 8] != a[epoch * 8:]
  assert len(set(a[:epoch * 8])) == epoch * 8  # An epoch reads each row once.


def test_a_global_batch_the_processes_cannot_share_is_a_config_error():
  config = configs.DataConfig(input_path="x", global_batch_size=10)
  with pytest.raises(configs.ConfigError, match="train_data.global_batch_size \\(10\\)"):
    host_pipeline.data_order(config, 0, 3)


def test_in_memory_examples_batch_like_records():
  examples = helpers.finetuning_examples("sentence")
  iterator = host_pipeline.array_batches(examples, 8, shuffle_window=0, repeat=False)
  assert iterator.num_batches == 5
  batches = _batches(iterator)
  np.testing.assert_array_equal(
      np.concatenate([b[constants.EXAMPLE_INDEX] for b in batches]),
      examples[constants.EXAMPLE_INDEX])
  iterator.close()
