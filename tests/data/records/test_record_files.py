"""The TensorFlow-free TFRecord reader: the records TensorFlow reads, its corruption
reports (file and byte offset), compression, and the Example decoding by record spec."""

import os
import re
import uuid

import numpy as np
import pytest
import tensorflow as tf

import host_input_helpers as helpers
from bert_tf.data.pipelines.loaders import squad as squad_kind
from bert_tf.data.records import example_decoding
from bert_tf.data.records import record_files
from bert_tf.data.records import record_specs
from bert_tf.data.records import tfrecords
from bert_tf.utils import file_systems
from bert_tf.utils import files
from bert_tf.utils import range_reads


def _tensorflow_says(path):
  """Where TensorFlow's own reader says the file breaks: "byte offset N (corrupted
  record)" or "(truncated record)" (the reference the reader is held to)."""
  try:
    for _ in tf.data.TFRecordDataset(path):
      pass
  except tf.errors.OpError as e:
    found = re.search(r"(corrupted|truncated) record at (\d+)", e.message)
    return f"byte offset {found.group(2)} ({found.group(1)} record)"
  return None


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
  paths, counts = helpers.write_pretraining_files(tmp_path_factory.mktemp("records"))
  return paths, counts


def _tf_records(path, compression_type=""):
  return [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type)]


def test_records_are_those_tensorflow_reads_in_file_order(shards):
  paths, counts = shards
  source = record_files.RecordSource(paths)
  assert len(source) == sum(counts)
  expected = [r for path in paths for r in _tf_records(path)]
  assert [source[i].data for i in range(len(source))] == expected
  assert source[counts[0]].path == paths[1] and source[counts[0]].offset == 0


@pytest.mark.parametrize("compression_type", ["GZIP", "ZLIB"])
def test_compressed_files_read_like_tensorflow_reads_them(shards, tmp_path, compression_type):
  records = _tf_records(shards[0][0])
  path = str(tmp_path / f"c.tfrecord.{compression_type}")
  with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression_type)) as writer:
    for record in records:
      writer.write(record)
  assert list(record_files.RecordFile(path, compression_type)) == records
  assert record_files.read_first_record(path, compression_type) == records[0]


def _corrupt(path, tmp_path, name, change):
  with open(path, "rb") as f:
    data = bytearray(f.read())
  bad = str(tmp_path / name)
  with open(bad, "wb") as f:
    f.write(change(data))
  return bad


def _flip(offset):
  def change(data):
    data[offset] ^= 1
    return bytes(data)
  return change


@pytest.mark.parametrize("name,change", [
    ("data.tfrecord", lambda second: _flip(second + 20)),
    ("length.tfrecord", lambda second: _flip(second + 2)),
    ("cut.tfrecord", lambda second: lambda data: bytes(data[:second + 30])),
])
def test_a_corrupt_record_names_the_file_and_the_byte_offset_tensorflow_names(
    shards, tmp_path, name, change):
  path = shards[0][0]
  second = record_files.RecordFile(path).offset(1)
  bad = _corrupt(path, tmp_path, name, change(second))
  expected = _tensorflow_says(bad)
  assert expected is not None and record_files.check_records(bad) == expected
  with pytest.raises(record_files.CorruptRecordError) as info:
    source = record_files.RecordSource([bad])
    for i in range(len(source)):
      source[i]  # pylint: disable=pointless-statement
  assert str(info.value) == f"Corrupt TFRecord file(s): {bad} at {expected}"


def test_validate_record_files_names_every_corrupt_file(shards, tmp_path):
  paths, _ = shards
  second = record_files.RecordFile(paths[1]).offset(1)
  bad = _corrupt(paths[1], tmp_path, "bad.tfrecord", _flip(second + 20))
  assert record_files.validate_record_files(",".join(paths)) == len(paths)
  with pytest.raises(record_files.CorruptRecordError,
                     match=f"bad.tfrecord at byte offset {second + 12} "):
    record_files.validate_record_files(f"{paths[0]},{bad}")


def test_a_record_cut_short_in_a_compressed_file_is_an_error(shards, tmp_path):
  path = str(tmp_path / "cut.tfrecord.gz")
  with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions("GZIP")) as writer:
    for record in _tf_records(shards[0][0]):
      writer.write(record)
  cut = _corrupt(path, tmp_path, "short.tfrecord.gz", lambda data: bytes(data[:-40]))
  with pytest.raises(record_files.CorruptRecordError, match="short.tfrecord.gz"):
    record_files.RecordFile(cut, "GZIP")


# ----- Example decoding -----

def _specs_and_files(tmp_path):
  """(spec, file) of every record kind the tools write."""
  out = [(record_specs.pretraining_spec(helpers.SEQ, helpers.PRED),
          helpers.write_pretraining_files(tmp_path, 1)[0][0])]
  for name in helpers.FINETUNING_KINDS:
    out.append((helpers.finetuning_spec(name), helpers.write_finetuning_file(tmp_path, name)))
  for labelled in (True, False):
    out.append((squad_kind.squad_spec(helpers.FINETUNING_SEQ),
                helpers.write_squad_file(tmp_path, labelled)))
  return out


def test_decoding_gives_what_parse_example_gives_for_every_record_kind(tmp_path):
  for spec, path in _specs_and_files(tmp_path):
    records = list(record_files.RecordFile(path))[:7]
    ours = example_decoding.decode_examples(records, spec)
    theirs = tfrecords.parse_records(tf.constant(records), spec)
    assert set(ours) == set(theirs) == {f.key for f in spec}
    for key, value in theirs.items():
      assert ours[key].dtype == value.dtype.as_numpy_dtype, (path, key)
      np.testing.assert_array_equal(ours[key], value.numpy(), err_msg=f"{path} {key}")


def test_a_record_without_a_feature_or_of_another_length_is_an_error_naming_it(shards):
  record = record_files.read_first_record(shards[0][0])
  where = ["a.tfrecord at byte offset 0"]
  longer = record_specs.pretraining_spec(helpers.SEQ + 1, helpers.PRED)
  with pytest.raises(example_decoding.ExampleFormatError,
                     match=r"a.tfrecord at byte offset 0: feature 'input_ids' holds 32 "
                     r"value\(s\); expected 33 int64"):
    example_decoding.decode_examples([record], longer, where)
  missing = longer + (record_specs.RecordFeature("extra", "extra", ()),)
  with pytest.raises(example_decoding.ExampleFormatError, match="lacks feature 'extra'"):
    example_decoding.decode_examples([record], missing[3:], where)
  with pytest.raises(example_decoding.ExampleFormatError, match="not a tf.train.Example"):
    example_decoding.decode_examples([b"\xff\xff"], missing, where)


@pytest.fixture(name="remote_without_tensorflow")
def _remote_without_tensorflow(monkeypatch):
  """A memory:// directory served by fsspec, as it is where TensorFlow is absent."""
  monkeypatch.setattr(file_systems, "_tensorflow_gfile", lambda: None)
  return f"memory://records-{uuid.uuid4().hex[:8]}"


def test_remote_records_are_read_in_place_by_ranged_reads_in_any_order_without_tensorflow(
    shards, remote_without_tensorflow, monkeypatch):
  paths, counts = shards
  remote = []
  for path in paths:
    remote.append(f"{remote_without_tensorflow}/{os.path.basename(path)}")
    files.copy(path, remote[-1])
  # Blocks smaller than a record and a cache of a few of them: records span blocks and
  # blocks are dropped and read again.
  monkeypatch.setattr(range_reads, "BLOCK_BYTES", 100)
  monkeypatch.setattr(range_reads, "CACHE_BYTES", 400)
  source = record_files.RecordSource(remote)
  expected = [r for path in paths for r in _tf_records(path)]
  order = np.random.default_rng(0).permutation(len(expected))
  assert [source[int(i)].data for i in order] == [expected[i] for i in order]
  assert source.row_counts() == counts and source[counts[0]].path == remote[1]
  source.close()
  with pytest.raises(FileNotFoundError, match="no file matches"):
    files.expand_patterns(f"{remote_without_tensorflow}/nothing-*")


def test_a_corrupt_remote_record_names_the_remote_file_and_the_offset_a_local_one_gets(
    shards, tmp_path, remote_without_tensorflow):
  path = shards[0][0]
  second = record_files.RecordFile(path).offset(1)
  bad = _corrupt(path, tmp_path, "bad.tfrecord", _flip(second + 20))
  remote = f"{remote_without_tensorflow}/bad.tfrecord"
  files.copy(bad, remote)
  assert record_files.check_records(remote) == record_files.check_records(bad) is not None


def test_a_remote_gzip_file_streams_through_the_file_layer_and_reads_like_tensorflow(
    shards, tmp_path, remote_without_tensorflow):
  records = _tf_records(shards[0][0])
  path = str(tmp_path / "c.tfrecord.gz")
  with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions("GZIP")) as writer:
    for record in records:
      writer.write(record)
  remote = f"{remote_without_tensorflow}/c.tfrecord.gz"
  files.copy(path, remote)
  assert list(record_files.RecordFile(remote, "GZIP")) == records
  assert record_files.read_first_record(remote, "GZIP") == records[0]
