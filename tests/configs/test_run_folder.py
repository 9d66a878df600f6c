"""Tests of bert_tf.configs.run_folder: a params.yaml names the vocab its folder holds,
relative to the folder, so that the folder reads the same moved or from another working
directory, on local and remote storage."""

import os

import pytest
import yaml

from bert_tf import configs
from bert_tf.configs import run_folder
from bert_tf.utils import files


def _params(folder, vocab_file):
  folder.mkdir(parents=True, exist_ok=True)
  (folder / "params.yaml").write_text(yaml.safe_dump({"tokenizer": {"vocab_file": vocab_file}}))
  return str(folder / "params.yaml")


def test_a_params_yaml_names_the_vocab_beside_it_from_any_working_directory(
    tmp_path, monkeypatch):
  run = tmp_path / "moved" / "run"
  path = _params(run, "vocab.txt")
  (run / "vocab.txt").write_text("[PAD]\n")
  monkeypatch.chdir(tmp_path)
  assert configs.load_yaml(path)["tokenizer"]["vocab_file"] == str(run / "vocab.txt")
  monkeypatch.chdir(run)
  assert configs.load_yaml("params.yaml")["tokenizer"]["vocab_file"] == "vocab.txt"


@pytest.mark.parametrize("named", ["data/vocab.txt", "/abs/vocab.txt", "gs://b/vocab.txt"])
def test_a_path_not_beside_the_params_yaml_or_not_relative_is_kept_as_given(tmp_path, named):
  # Earlier versions recorded the vocab as the run was given it, relative to its cwd.
  path = _params(tmp_path / "run", named)
  assert configs.load_yaml(path)["tokenizer"]["vocab_file"] == named


def test_only_a_params_yaml_has_its_paths_resolved_beside_it(tmp_path):
  (tmp_path / "vocab.txt").write_text("[PAD]\n")
  other = tmp_path / "experiment.yaml"
  other.write_text(yaml.safe_dump({"tokenizer": {"vocab_file": "vocab.txt"}}))
  assert configs.load_yaml(str(other))["tokenizer"]["vocab_file"] == "vocab.txt"


def test_keep_vocab_copies_it_once_into_the_folder_local_and_remote(tmp_path):
  vocab = tmp_path / "vocab_source.txt"
  vocab.write_text("[PAD]\n[UNK]\n")
  for folder in (str(tmp_path / "run"), f"ram://run-folder-{os.getpid()}/run"):
    assert run_folder.keep_vocab(str(vocab), folder) == "vocab.txt"
    kept = os.path.join(folder, "vocab.txt")
    assert files.read_bytes(kept) == vocab.read_bytes()
    assert run_folder.keep_vocab(kept, folder) == "vocab.txt"  # itself: left as it is
    assert sorted(files.listdir(folder)) == ["vocab.txt"]  # no temporary left
    params = os.path.join(folder, "params.yaml")
    with files.open_file(params, "w") as f:
      f.write("tokenizer:\n  vocab_file: vocab.txt\n")
    assert configs.load_yaml(params)["tokenizer"]["vocab_file"] == kept
