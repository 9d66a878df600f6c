"""Ranged reads of a remote file through a shared block cache (bert_tf.utils.range_reads)."""

import concurrent.futures
import os
import uuid

import numpy as np
import pytest

from bert_tf.utils import file_systems
from bert_tf.utils import files
from bert_tf.utils import range_reads


@pytest.fixture(name="remote_file")
def _remote_file(monkeypatch):
  """A 1000-byte file on memory://, served by fsspec as where TensorFlow is absent."""
  monkeypatch.setattr(file_systems, "_tensorflow_gfile", lambda: None)
  path = f"memory://ranges-{uuid.uuid4().hex[:8]}/data"
  data = bytes(range(250)) * 4
  with files.atomic_open(path, "wb") as f:
    f.write(data)
  return path, data


def _counting_reads(monkeypatch):
  reads = []
  opened = file_systems.FsspecFiles.open_ranges

  def open_ranges(self, path):
    f = opened(self, path)
    read = f.read
    f.read = lambda count: reads.append(count) or read(count)
    return f
  monkeypatch.setattr(file_systems.FsspecFiles, "open_ranges", open_ranges)
  return reads


def test_slices_across_blocks_are_the_files_bytes_and_a_pass_reads_each_block_once(
    remote_file, monkeypatch):
  path, data = remote_file
  reads = _counting_reads(monkeypatch)
  reader = range_reads.RangeReader(path, range_reads.BlockCache(block_bytes=64, capacity=128))
  assert len(reader) == len(data)
  spans = [(start, start + 30) for start in range(0, 1000, 30)]
  assert [reader[a:b] for a, b in spans] == [data[a:b] for a, b in spans]
  assert sum(reads) == len(data) and len(reads) == -(-len(data) // 64)
  assert reader[990:2000] == data[990:] and reader[5:5] == b""
  reader.close()


def test_the_cache_keeps_at_most_its_capacity_dropping_least_recently_used_blocks(
    remote_file, monkeypatch):
  path, data = remote_file
  reads = _counting_reads(monkeypatch)
  reader = range_reads.RangeReader(path, range_reads.BlockCache(block_bytes=100, capacity=200))
  for start in (0, 100, 0, 200, 0, 100):
    assert reader[start:start + 10] == data[start:start + 10]
  # 0 and 100 read; 0 hit; 200 drops 100; 0 hit; 100 read again.
  assert reads == [100, 100, 100, 100]


def test_threads_reading_one_file_at_once_get_its_bytes(remote_file):
  path, data = remote_file
  reader = range_reads.RangeReader(path, range_reads.BlockCache(block_bytes=50, capacity=150))
  rng = np.random.default_rng(0)
  spans = [sorted(rng.integers(0, len(data), 2)) for _ in range(400)]
  with concurrent.futures.ThreadPoolExecutor(8) as pool:
    got = list(pool.map(lambda span: reader[span[0]:span[1]], spans))
  assert got == [data[a:b] for a, b in spans]
  reader.close()


def _counting_range_reads(monkeypatch):
  """The sizes of the ranges FsspecFiles.read_ranges reads (one request each), as a
  list filled as they are read."""
  reads = []
  read_ranges = file_systems.FsspecFiles.read_ranges

  def counted(self, path, ranges):
    for data in read_ranges(self, path, ranges):
      reads.append(len(data))
      yield data
  monkeypatch.setattr(file_systems.FsspecFiles, "read_ranges", counted)
  return reads


def test_a_fetch_plan_covers_the_file_in_ranges_of_at_most_8_mib_in_at_most_8_runs():
  for size in (0, 1, 8 << 20, (8 << 20) + 1, 69_000_000, 1_300_000_000):
    plan = range_reads.fetch_plan(size)
    ranges = [span for run in plan for span in run]
    assert len(plan) <= range_reads.FETCH_WORKERS
    assert len(ranges) == -(-size // range_reads.FETCH_BYTES)
    assert all(0 < stop - start <= range_reads.FETCH_BYTES for start, stop in ranges)
    assert [start for start, _ in ranges] == [0, *[stop for _, stop in ranges]][:len(ranges)]
    assert (ranges[-1][1] if ranges else 0) == size


def test_fetch_copies_the_file_in_one_read_per_range(remote_file, monkeypatch, tmp_path):
  path, data = remote_file
  monkeypatch.setattr(range_reads, "FETCH_BYTES", 64)
  monkeypatch.setattr(range_reads, "FETCH_WORKERS", 4)
  reads = _counting_range_reads(monkeypatch)
  target = str(tmp_path / "copy")
  assert range_reads.fetch(path, target) == len(data)
  with open(target, "rb") as f:
    assert f.read() == data
  assert sorted(reads) == sorted(b - a for run in range_reads.fetch_plan(len(data), 64, 4)
                                 for a, b in run)
  assert len(reads) == -(-len(data) // 64)


def test_a_local_copy_is_fetched_once_until_the_file_changes_or_is_released(
    remote_file, monkeypatch):
  path, data = remote_file
  fetched = []
  fetch = range_reads.fetch
  monkeypatch.setattr(range_reads, "fetch",
                      lambda *args: fetched.append(args[0]) or fetch(*args))
  first = range_reads.local_copy(path)
  assert range_reads.local_copy(path) == first and fetched == [path]
  with open(first, "rb") as f:
    assert f.read() == data
  with files.atomic_open(path, "wb") as f:
    f.write(b"replaced")
  second = range_reads.local_copy(path)
  assert fetched == [path, path] and not os.path.exists(first)
  with open(second, "rb") as f:
    assert f.read() == b"replaced"
  range_reads.release_local_copy()
  assert not os.path.exists(second)
