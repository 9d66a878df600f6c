"""How a portable checkpoint's arrays move between memory and the file
(bert_tf.checkpoints.array_io): large ones through the file's bytes, each CRC32C taken
beside; any other layout through h5py, checked all the same."""

import os
import time

import h5py
import ml_dtypes
import numpy as np
import pytest

import checkpoint_helpers
from bert_tf.checkpoints import array_io
from bert_tf.checkpoints import checksums
from bert_tf.checkpoints import manifest
from bert_tf.checkpoints import portable
from bert_tf.checkpoints import snapshots

_ATTRS = {"format": portable.FORMAT, "version": portable.VERSION, "backend": ""}


def _arrays():
  rng = np.random.default_rng(0)
  return {
      # Over one chunk, not a whole number of chunks: the last chunk is short.
      "items/encoder/large": rng.standard_normal((3, 700, 1024)).astype(np.float32),
      "items/encoder/bfloat16": rng.standard_normal((1024, 1024)).astype(ml_dtypes.bfloat16),
      "items/encoder/small": rng.standard_normal(7).astype(np.float32),
      "optimizer/count": np.asarray(5, np.int64),
      "step": np.asarray(9, np.int64),
  }


def _write(directory, arrays):
  """The path of a checkpoint of `arrays` written in `directory`."""
  return portable.write(str(directory / "ckpt-9.h5"), snapshots.Snapshot(dict(_ATTRS), arrays))


def _assert_damaged(path, match):
  """portable.read(path) raises DamagedCheckpointError matching `match`."""
  with pytest.raises(portable.DamagedCheckpointError, match=match):
    portable.read(path)


def test_arrays_large_and_small_of_every_kind_round_trip_with_their_checksums(
    tmp_path, monkeypatch):
  monkeypatch.setattr(array_io, "CHUNK_BYTES", 1 << 20)
  arrays = _arrays()
  path = portable.write(portable.path_for_step(str(tmp_path), 9), snapshots.Snapshot(
      dict(_ATTRS), arrays, {"items/masked_lm/large": "items/encoder/large"}))
  with h5py.File(path, "r") as f:
    header = manifest.header(f, portable.FORMAT, os.path.getsize(path))
    for name, array in arrays.items():
      assert header.arrays[name].crc32c == checksums.crc32c(array), name
      assert checksums.CRC_ATTR not in f[name].attrs and f[name].chunks is None
    assert header.links == {"items/masked_lm/large": "items/encoder/large"}
    assert len(header.arrays) == len(arrays) and array_io.TABLE not in f
  read = portable.read(path)
  for name, array in arrays.items():
    assert read.arrays[name].dtype == array.dtype and read.arrays[name].shape == array.shape
    np.testing.assert_array_equal(read.arrays[name], array, err_msg=name)
  assert read.arrays["items/masked_lm/large"] is read.arrays["items/encoder/large"]
  assert read.arrays["items/encoder/large"].ctypes.data % 64 == 0


def _write_with_h5py(path, name, array, **options):
  """A checkpoint holding `array` stored by h5py with `options` (a layout the writer
  does not use), its CRC32C written with it."""
  with h5py.File(path, "w") as f:
    f.attrs.update(_ATTRS, version=4)
    dataset = f.create_dataset(name, data=array, **options)
    dataset.attrs["dtype"] = str(array.dtype)
    f.create_dataset(array_io.TABLE, data=np.array(
        [(name, checksums.crc32c(array))],
        [("name", h5py.string_dtype()), ("crc32c", np.uint32)]))


def test_an_array_of_another_layout_is_read_and_checked_through_h5py(tmp_path):
  array = np.arange(256 * 1024, dtype=np.float32).reshape(256, 1024)
  path = str(tmp_path / "ckpt-1.h5")
  _write_with_h5py(path, "items/encoder/kernel", array, chunks=(64, 1024),
                   compression="gzip")
  np.testing.assert_array_equal(portable.read(path).arrays["items/encoder/kernel"], array)
  with h5py.File(path, "r+") as f:
    f["items/encoder/kernel"][0, 0] = 1.0
  _assert_damaged(path, f"{path} fails its checksum at items/encoder/kernel")


def test_a_file_ending_inside_a_large_array_is_unreadable_naming_the_array(tmp_path):
  arrays = _arrays()
  path = _write(tmp_path, arrays)
  checkpoint_helpers.rewrite_as_version_4(path)
  with h5py.File(path, "r") as f, array_io.Reader(f) as reader:
    offset = f["items/encoder/large"].id.get_offset()
    reader.read([])  # the table (at the end of the file)
    os.truncate(path, offset + 1000)
    with pytest.raises(OSError, match="the file ends inside items/encoder/large"):
      reader.read(["items/encoder/large"])
    assert reader.reading == "items/encoder/large"


def test_without_checksums_nothing_is_written_or_checked(tmp_path, monkeypatch):
  monkeypatch.setattr(array_io, "CHECKSUMS", False)
  arrays = _arrays()
  path = _write(tmp_path, arrays)
  with h5py.File(path, "r") as f:
    header = manifest.header(f, portable.FORMAT, os.path.getsize(path))
    assert array_io.TABLE not in f and all(header.arrays[name].crc32c is None for name in arrays)
    assert not any(checksums.CRC_ATTR in f[name].attrs for name in arrays)
  np.testing.assert_array_equal(portable.read(path).arrays["step"], 9)


def test_an_array_missing_from_the_table_or_the_table_missing_is_unreadable(tmp_path):
  path = _write(tmp_path, _arrays())
  checkpoint_helpers.rewrite_as_version_4(path)
  np.testing.assert_array_equal(portable.read(path).arrays["step"], 9)  # version 4 reads
  with h5py.File(path, "r+") as f:
    rows = f[array_io.TABLE][()]
    del f[array_io.TABLE]
    f.create_dataset(array_io.TABLE, data=rows[[name != b"items/encoder/large"
                                                for name in rows["name"]]])
  _assert_damaged(path, "reading items/encoder/large.*no entry in the file's CRC32C table")
  with h5py.File(path, "r+") as f:
    del f[array_io.TABLE]
  _assert_damaged(path, "unreadable \\(reading its header\\): it says format version 4, "
                  "which has CRC32C table")


def test_a_version_3_file_with_a_crc32c_attribute_on_each_array_is_still_checked(tmp_path):
  arrays = _arrays()
  path = _write(tmp_path, arrays)
  checkpoint_helpers.rewrite_as_version_3(path)
  read = portable.read(path)
  for name, array in arrays.items():
    np.testing.assert_array_equal(read.arrays[name], array, err_msg=name)
  checkpoint_helpers.flip_bit(path, "items/encoder/large", bit=3)
  _assert_damaged(path, f"{path} fails its checksum at items/encoder/large")


def test_the_same_content_written_twice_a_second_apart_is_the_same_bytes(tmp_path):
  content = snapshots.Snapshot(dict(_ATTRS), _arrays(),
                              {"items/masked_lm/large": "items/encoder/large"})
  first = portable.write(str(tmp_path / "a" / "ckpt-9.h5"), content)
  time.sleep(1.05 - time.time() % 1)  # into the next second: no modification times
  second = portable.write(str(tmp_path / "b" / "ckpt-9.h5"), content)
  with open(first, "rb") as a, open(second, "rb") as b:
    assert a.read() == b.read()
