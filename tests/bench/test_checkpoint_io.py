"""bench/checkpoint_io.py: the checksums' modes timed in turns on a checkpoint that reads
back whole, and the report's ratio; the remote restore's arithmetic (the emulator's
requests read from a mark on, the medians, the ratios to the download, the bound on the
requests, the table)."""

import os
from unittest import mock

import numpy as np

import checkpoint_helpers
from bench import checkpoint_io
from bert_tf.checkpoints import portable
from bert_tf.checkpoints import snapshots


def test_both_checksum_modes_are_timed_in_turns_on_a_whole_checkpoint(tmp_path):
  content = snapshots.snapshot(checkpoint_helpers.tiny_model().checkpoint_items, step=3,
                              position={"batches_read": 3})
  assert content.links  # the tied embeddings, stored once
  saver = mock.Mock(model_dir=str(tmp_path))  # the file level writes into its model_dir
  times = checkpoint_io.measure_checksums(
      *checkpoint_io.save_and_restore("file", saver, content), 2)
  for mode in checkpoint_io.MODES:
    assert [len(times[mode][what]) for what in ("save", "restore")] == [2, 2]
    assert all(t > 0 for t in times[mode]["save"] + times[mode]["restore"])
  assert not list(tmp_path.iterdir())
  path = portable.write(portable.path_for_step(str(tmp_path), 1), content)
  assert portable.read(path).arrays.keys() == content.arrays.keys() | content.links.keys()
  report = checkpoint_io.checksums_report(
      {"with checksums": {"save": [1.1], "restore": [2.0]},
       "without": {"save": [1.0], "restore": [2.0]}}, content, "BERT-tiny trainer checkpoint")
  assert "save: 1.10 s with checksums, 1.00 s without (+10.0%; 95% interval +10.0% to " \
         "+10.0%)" in report
  assert "restore: 2.00 s with checksums, 2.00 s without (+0.0%;" in report
  assert "BERT-tiny trainer checkpoint" in report and "every array alone" in report
  report = checkpoint_io.checksums_report(  # turns resampled whole: 0% to +20%
      {"with checksums": {"save": [1.0, 1.2], "restore": [1.0, 1.0]},
       "without": {"save": [1.0, 1.0], "restore": [1.0, 1.0]}}, content, "tiny")
  assert "(+10.0%; 95% interval +0.0% to +20.0%)" in report


def test_the_trainer_level_times_the_savers_save_and_a_restore_into_the_variables(
    tmp_path):
  saver = checkpoint_io.bert_saver("tiny", str(tmp_path))
  engine = saver.engine
  save, restore = checkpoint_io.save_and_restore("trainer", saver, None)
  path = save()
  assert path == portable.path_for_step(str(tmp_path), 1)
  kernel = engine.model.trained_items["encoder"].trainable_variables[0]
  saved = kernel.numpy().copy()
  kernel.assign(saved + 1)
  assert restore(path) == 1
  np.testing.assert_array_equal(kernel.numpy(), saved)
  os.remove(path)
  times = checkpoint_io.measure_checksums(save, restore, 1)
  assert all(len(times[mode]["restore"]) == 1 for mode in checkpoint_io.MODES)
  assert not any(name.endswith(portable.SUFFIX) for name in os.listdir(tmp_path))


def test_summary_takes_medians_and_bounds_requests_by_one_per_8_mib_plus_16():
  times = {"download": [2.0, 1.0, 9.0], "fetch": [3.0, 3.0, 1.0],
           "restore": [3.0, 1.5, 2.0]}
  counts = {"download": [2] * 3, "fetch": [13] * 3, "restore": [30, 20, 25]}
  row = checkpoint_io.summarize(times, counts, size_bytes=100 << 20)
  assert row["download_s"] == 2.0 and row["restore_s"] == 2.0 and row["ratio"] == 1.0
  assert row["fetch_s"] == 3.0 and row["fetch_ratio"] == 1.5
  assert row["download_requests"] == 2 and row["restore_requests"] == 25
  assert row["bound"] == 13 + 16  # 100 MiB: 13 ranges of at most 8 MiB
  assert row["size_mb"] == 100


def test_table_has_one_row_per_engine_and_size():
  row = dict(size_mb=1300, download_s=4.0, download_requests=3, fetch_s=4.4,
             restore_s=5.0, restore_requests=170, bound=179, fetch_ratio=1.1, ratio=1.25)
  text = checkpoint_io.table({"jax/base": row, "tensorflow/base": row})
  lines = text.splitlines()
  assert len(lines) == 4 and "| BERT-base | jax | 1300 |" in lines[2]
  assert lines[3].endswith("| 1.10x | 1.25x |")


def test_emulator_log_lines_are_read_as_requests_from_a_mark_on(tmp_path):
  log = os.path.join(str(tmp_path), "emulator.log")
  with open(log, "w", encoding="utf-8") as f:
    f.write('INFO "GET /storage/v1/b/b/o/x HTTP/1.1" 200 -\n')
  first, mark = checkpoint_io.logged_requests(log)
  with open(log, "a", encoding="utf-8") as f:
    f.write('INFO "GET /download/storage/v1/b/b/o/x?alt=media HTTP/1.1" 206 -\n'
            'INFO [SERVER] All services started\n')
  later, _ = checkpoint_io.logged_requests(log, mark)
  assert first == [("GET", "/storage/v1/b/b/o/x")]
  assert later == [("GET", "/download/storage/v1/b/b/o/x?alt=media")]
