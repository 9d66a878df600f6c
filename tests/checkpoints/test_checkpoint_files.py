"""Tests of bert_tf.checkpoints.files: all-or-nothing output folders, vocab counting."""

import os

import pytest

from bert_tf.checkpoints.files import ConversionError, atomic_output_dir, count_vocab


def test_output_folder_appears_only_when_the_body_completes(tmp_path):
  out = tmp_path / "out"
  with pytest.raises(RuntimeError):
    with atomic_output_dir(str(out)) as tmp:
      (tmp_path / "out_partial_marker").write_text("")
      open(os.path.join(tmp, "half_written"), "w").close()
      raise RuntimeError("interrupted")
  assert not out.exists()
  assert sorted(os.listdir(tmp_path)) == ["out_partial_marker"]
  with atomic_output_dir(str(out)) as tmp:
    open(os.path.join(tmp, "done"), "w").close()
    assert not out.exists()
  assert os.listdir(out) == ["done"]
  assert oct(os.stat(out).st_mode & 0o777) == oct(0o755)


def test_existing_output_folder_is_an_error_unless_overwrite(tmp_path):
  out = tmp_path / "out"
  out.mkdir()
  (out / "old").write_text("")
  with pytest.raises(ConversionError, match="already exists"):
    with atomic_output_dir(str(out)):
      pass
  with atomic_output_dir(str(out), overwrite=True) as tmp:
    open(os.path.join(tmp, "new"), "w").close()
  assert os.listdir(out) == ["new"]
  assert sorted(os.listdir(tmp_path)) == ["out"]


def test_count_vocab_counts_lines_and_names_a_missing_file(tmp_path):
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("[PAD]\n[UNK]\nhello\n", encoding="utf-8")
  assert count_vocab(str(vocab)) == 3
  with pytest.raises(ConversionError, match="nope.txt"):
    count_vocab(str(tmp_path / "nope.txt"))
