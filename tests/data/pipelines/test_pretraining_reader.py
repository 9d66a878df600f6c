"""The pretraining tf.data reader: batches, sharding, errors, inspection, checkpointing."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

import pretraining_fixtures as fx
import trainer_helpers
from bert_tf import configs
from bert_tf import constants
from bert_tf.data.records import pretraining_files
from bert_tf.data.records import pretraining_format
from bert_tf.data.pipelines import pretraining_reader as reader
from bert_tf.data.records import record_files
from bert_tf.tasks import base as task_base
from bert_tf.training.tf_engine import input as tf_input

SEQ, PRED = 32, 5


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  d = tmp_path_factory.mktemp("records")
  paths, counts = [], []
  for i in range(4):
    path = str(d / f"data-{i:05d}-of-00004.tfrecord")
    counts.append(fx.write_record_file(path, num_documents=20, seed=i))
    paths.append(path)
  gz = str(d / "gz-00000-of-00001.tfrecord.gz")
  fx.write_record_file(gz, num_documents=10, seed=9, gzip=True)
  return {"dir": str(d), "paths": paths, "counts": counts, "gzip": gz}


def _config(input_path, **kw):
  args = dict(input_path=input_path, global_batch_size=8, seq_length=SEQ,
              max_predictions_per_seq=PRED, is_training=False, drop_remainder=False)
  args.update(kw)
  return configs.DataConfig(**args)


def _all_rows(dataset, key=constants.INPUT_WORD_IDS):
  return [tuple(row) for batch in dataset for row in batch[key].numpy().tolist()]


def test_batches_have_the_model_input_names_dtypes_and_shapes(files):
  batch = next(iter(reader.build_pretraining_dataset(_config(files["paths"][0]))))
  expected = {
      constants.INPUT_WORD_IDS: (tf.int32, [8, SEQ]),
      constants.INPUT_MASK: (tf.int32, [8, SEQ]),
      constants.INPUT_TYPE_IDS: (tf.int32, [8, SEQ]),
      constants.MASKED_LM_POSITIONS: (tf.int32, [8, PRED]),
      constants.MASKED_LM_IDS: (tf.int32, [8, PRED]),
      constants.MASKED_LM_WEIGHTS: (tf.float32, [8, PRED]),
      constants.NEXT_SENTENCE_LABELS: (tf.int32, [8]),
  }
  assert set(batch) == set(expected)
  for name, (dtype, shape) in expected.items():
    assert batch[name].dtype == dtype and batch[name].shape.as_list() == shape, name


def test_evaluation_reads_every_record_once_and_training_repeats(files):
  pattern = os.path.join(files["dir"], "data-*.tfrecord")
  rows = _all_rows(reader.build_pretraining_dataset(_config(pattern)))
  assert len(rows) == sum(files["counts"])
  train = reader.build_pretraining_dataset(_config(pattern, is_training=True,
                                                   drop_remainder=True))
  n = sum(1 for _ in train.take(sum(files["counts"]) // 8 + 5))
  assert n == sum(files["counts"]) // 8 + 5


def test_drop_remainder_gives_only_full_batches(files):
  config = _config(files["paths"][0], global_batch_size=7, drop_remainder=True)
  sizes = [b[constants.INPUT_WORD_IDS].shape[0] for b in reader.build_pretraining_dataset(config)]
  assert sizes and set(sizes) == {7}
  assert len(sizes) == files["counts"][0] // 7


def test_batch_dimension_is_static_where_no_batch_can_be_short(files):
  # The TensorFlow CPU speed path (fused kernels) applies only to static shapes.
  def batch_dims(**kw):
    spec = reader.build_pretraining_dataset(_config(files["paths"][0], **kw)).element_spec
    return {value.shape[0] for value in spec.values()}

  assert batch_dims(is_training=True, drop_remainder=False) == {8}
  assert batch_dims(is_training=False, drop_remainder=True) == {8}
  assert batch_dims(is_training=False, drop_remainder=False) == {None}
  context = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                       num_replicas_in_sync=2)
  spec = reader.build_pretraining_dataset(
      _config(files["paths"][0], is_training=True), context).element_spec
  assert spec[constants.INPUT_WORD_IDS].shape.as_list() == [4, SEQ]


def test_input_context_shards_files_over_pipelines_without_overlap(files):
  pattern = os.path.join(files["dir"], "data-*.tfrecord")
  shards = []
  for i in range(2):
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i,
                                         num_replicas_in_sync=2)
    dataset = reader.build_pretraining_dataset(_config(pattern, global_batch_size=8), context)
    batch = next(iter(dataset))
    assert batch[constants.INPUT_WORD_IDS].shape[0] == 4  # Per-replica batch.
    shards.append(set(_all_rows(dataset)))
  assert not shards[0] & shards[1]
  assert len(shards[0]) + len(shards[1]) == len(set(_all_rows(
      reader.build_pretraining_dataset(_config(pattern)))))


def test_gzip_files_read_with_compression_type(files):
  rows = _all_rows(reader.build_pretraining_dataset(_config(files["gzip"],
                                                            compression_type="GZIP")))
  assert len(rows) > 10


@pytest.mark.parametrize("input_path", ["", "/nonexistent/dir/pretrain-*.tfrecord"])
def test_missing_or_empty_glob_is_an_error_naming_it(input_path):
  with pytest.raises(pretraining_files.PretrainingInputError,
                     match="input_path: no input file given" if not input_path else "nonexistent"):
    reader.build_pretraining_dataset(_config(input_path))


def _damaged_copy(source, path, offset_in_record):
  """A copy of `source` whose second record has 4 bytes damaged at `offset_in_record`
  (0: its length header, 12: its data)."""
  with open(source, "rb") as f:
    data = bytearray(f.read())
  second = 12 + int.from_bytes(data[:8], "little") + 4
  data[second + offset_in_record:second + offset_in_record + 4] = b"XXXX"
  with open(path, "wb") as f:
    f.write(bytes(data))
  return second


def test_a_corrupt_length_header_fails_when_the_input_is_built_naming_file_and_offset(
    files, tmp_path):
  bad = str(tmp_path / "bad.tfrecord")
  offset = _damaged_copy(files["paths"][0], bad, 0)
  with pytest.raises(record_files.CorruptRecordError,
                     match=f"bad.tfrecord at byte offset {offset} "):
    reader.build_pretraining_dataset(_config(files["paths"][1] + "," + bad))


def test_a_corrupt_record_fails_when_read_and_is_explained_with_file_and_offset(
    files, tmp_path):
  bad = str(tmp_path / "bad.tfrecord")
  offset = _damaged_copy(files["paths"][0], bad, 12)
  config = _config(files["paths"][1] + "," + bad)
  with pytest.raises(tf.errors.InvalidArgumentError) as info:
    for _ in reader.build_pretraining_dataset(config):
      pass
  explained = tf_input.corrupt_input_error(
      task_base.get_task(trainer_helpers.tiny_experiment()), info.value, config)
  assert isinstance(explained, record_files.CorruptRecordError)
  assert f"bad.tfrecord at byte offset {offset + 12} " in str(explained)
  assert files["paths"][1] not in str(explained)


def test_inspect_reports_lengths_and_largest_id_and_checks_the_config(files, tmp_path):
  info = pretraining_files.inspect_pretraining_files(os.path.join(files["dir"], "data-*.tfrecord"))
  assert (info.seq_length, info.max_predictions_per_seq) == (SEQ, PRED)
  assert info.summary is None and info.vocab_size is None
  assert 0 < info.max_token_id < len(fx.VOCAB)
  info.check_config(_config("x"), vocab_size=len(fx.VOCAB))
  with pytest.raises(pretraining_files.PretrainingInputError, match="seq_length is 64"):
    info.check_config(_config("x", seq_length=64), vocab_size=len(fx.VOCAB))
  # With a summary beside the files, its vocab size and largest id count.
  with open(pretraining_format.summary_path_for_record_file(files["paths"][0]), "w") as f:
    json.dump({"vocab_size": 30522, "max_token_id": 30000}, f)
  try:
    info = pretraining_files.inspect_pretraining_files(files["paths"][0])
    assert info.vocab_size == 30522 and info.max_token_id == 30000
    with pytest.raises(pretraining_files.PretrainingInputError, match="vocab_size 100 is too small"):
      info.check_config(_config("x"), vocab_size=100)
  finally:
    os.remove(pretraining_format.summary_path_for_record_file(files["paths"][0]))


def test_inspect_of_an_empty_file_is_an_error_naming_it(tmp_path):
  path = str(tmp_path / "empty.tfrecord")
  open(path, "wb").close()
  with pytest.raises(pretraining_files.PretrainingInputError, match="empty.tfrecord"):
    pretraining_files.inspect_pretraining_files(path)


def test_iterator_checkpoint_resumes_at_the_same_batch_with_whole_word_dynamic_masking(files, tmp_path):
  vocab = fx.write_vocab(tmp_path)
  config = _config(files["paths"][0], is_training=True, dynamic_masking=True,
                   whole_word_masking=True, shuffle_buffer_size=4)
  tf.random.set_seed(3)
  iterator = iter(reader.build_pretraining_dataset(config, vocab_file=vocab))
  next(iterator)
  checkpoint = tf.train.Checkpoint(iterator=iterator)
  path = checkpoint.save(str(tmp_path / "ckpt"))
  expected = next(iterator)
  tf.random.set_seed(3)
  restored = iter(reader.build_pretraining_dataset(config, vocab_file=vocab))
  tf.train.Checkpoint(iterator=restored).restore(path)
  got = next(restored)
  assert got[constants.MASKED_LM_WEIGHTS].numpy().sum() > 0
  for name in expected:
    np.testing.assert_array_equal(got[name].numpy(), expected[name].numpy())
