"""bench/remote_restore.py's arithmetic: the emulator's requests counted by kind, the
medians, the ratio to the download and the bound on the restore's requests, and the
table. Pure Python, no TensorFlow; the emulator's log format is the emulator's own."""

import os

from bench import remote_restore


def test_request_counts_tell_object_reads_from_metadata_requests():
  requests = [("GET", "/download/storage/v1/b/bucket/o/run%2Fckpt-1.h5?alt=media"),
              ("GET", "/download/storage/v1/b/bucket/o/run%2Fckpt-1.h5?alt=media"),
              ("GET", "/storage/v1/b/bucket/o/run%2Fckpt-1.h5"),
              ("GET", "/storage/v1/b/bucket/o?prefix=run%2F")]
  assert remote_restore.request_counts(requests) == {"total": 4, "ranged": 2, "metadata": 2}


def test_summary_takes_medians_and_bounds_requests_by_one_per_8_mib_plus_16():
  times = {"download": [2.0, 1.0, 9.0], "fetch": [3.0, 3.0, 1.0],
           "restore": [3.0, 1.5, 2.0]}
  counts = {"download": [{"total": 2}] * 3, "fetch": [{"total": 13}] * 3,
            "restore": [{"total": n} for n in (30, 20, 25)]}
  row = remote_restore.summarize(times, counts, size_bytes=100 << 20)
  assert row["download_s"] == 2.0 and row["restore_s"] == 2.0 and row["ratio"] == 1.0
  assert row["fetch_s"] == 3.0 and row["fetch_ratio"] == 1.5
  assert row["download_requests"] == 2 and row["restore_requests"] == 25
  assert row["bound"] == 13 + 16  # 100 MiB: 13 ranges of at most 8 MiB
  assert row["size_mb"] == 100


def test_table_has_one_row_per_engine_and_size():
  row = dict(size_mb=1300, download_s=4.0, download_requests=3, fetch_s=4.4,
             restore_s=5.0, restore_requests=170, bound=179, fetch_ratio=1.1, ratio=1.25)
  text = remote_restore.table({"jax/base": row, "tensorflow/base": row})
  lines = text.splitlines()
  assert len(lines) == 4 and "| BERT-base | jax | 1300 |" in lines[2]
  assert lines[3].endswith("| 1.10x | 1.25x |")


def test_emulator_log_lines_are_read_as_requests_from_a_mark_on(tmp_path):
  log = os.path.join(str(tmp_path), "emulator.log")
  with open(log, "w", encoding="utf-8") as f:
    f.write('INFO "GET /storage/v1/b/b/o/x HTTP/1.1" 200 -\n')
  first, mark = remote_restore.logged_requests(log)
  with open(log, "a", encoding="utf-8") as f:
    f.write('INFO "GET /download/storage/v1/b/b/o/x?alt=media HTTP/1.1" 206 -\n'
            'INFO [SERVER] All services started\n')
  later, _ = remote_restore.logged_requests(log, mark)
  assert first == [("GET", "/storage/v1/b/b/o/x")]
  assert later == [("GET", "/download/storage/v1/b/b/o/x?alt=media")]
