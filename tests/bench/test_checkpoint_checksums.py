"""bench/checkpoint_checksums.py: both modes timed in turns on a checkpoint that reads
back whole, and the report's ratio."""

from bench import checkpoint_checksums
from bert_tf.checkpoints import portable


def test_both_modes_are_timed_in_turns_on_a_whole_trainer_checkpoint(tmp_path):
  content = checkpoint_checksums.bert_state("tiny")
  # The tied embeddings once, the moments of every weight, step and position.
  assert content.links and "step" in content.arrays and "input/batches_read" in content.arrays
  times = checkpoint_checksums.measure(content, 2, str(tmp_path))
  for mode in checkpoint_checksums.MODES:
    assert [len(times[mode][what]) for what in ("save", "restore")] == [2, 2]
    assert all(t > 0 for t in times[mode]["save"] + times[mode]["restore"])
  assert not list(tmp_path.iterdir())
  path = portable.write(portable.path_for_step(str(tmp_path), 1), content)
  assert portable.read(path).arrays.keys() == (
      content.arrays.keys() | content.links.keys())
  report = checkpoint_checksums.report(
      {"with checksums": {"save": [1.1], "restore": [2.0]},
       "without": {"save": [1.0], "restore": [2.0]}}, "tiny", 0.01, 0.05)
  assert "save: 1.10 s with checksums, 1.00 s without (+10.0%)" in report
  assert "restore: 2.00 s with checksums, 2.00 s without (+0.0%)" in report
  assert "the CRC32C of every array alone: 0.05 s" in report
  assert checkpoint_checksums.checksum_seconds(content) > 0
