"""bert_tf.utils.files: one expander of input globs, one atomic writer."""

import os
import subprocess
import sys

import pytest

from bert_tf.utils import files


def _touch(path, text="x"):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(text)
  return str(path)


def test_expand_patterns_keeps_glob_order_sorts_each_glob_and_drops_repeats(tmp_path):
  b2, b1 = _touch(tmp_path / "b2.txt"), _touch(tmp_path / "b1.txt")
  a = _touch(tmp_path / "a.txt")
  (tmp_path / "dir.txt").mkdir()
  pattern = f"{tmp_path}/b*.txt, {a},{tmp_path}/*.txt"
  assert files.expand_patterns(pattern) == [b1, b2, a]
  assert files.expand_patterns([f"{tmp_path}/b*.txt", a]) == [b1, b2, a]


def test_expand_patterns_names_the_field_and_the_glob_that_matches_nothing(tmp_path):
  _touch(tmp_path / "a.txt")
  with pytest.raises(FileNotFoundError, match=r"train_data.input_path: no file matches .*/z\*"):
    files.expand_patterns(f"{tmp_path}/a.txt,{tmp_path}/z*", field="train_data.input_path")
  with pytest.raises(FileNotFoundError, match="--input_file: no input file given"):
    files.expand_patterns(" , ", field="--input_file")


def test_atomic_open_replaces_the_file_only_when_complete(tmp_path):
  path = str(tmp_path / "sub" / "out.txt")
  files.write_lines(path, ["one", "two"])
  assert open(path).read() == "one\ntwo\n"
  with pytest.raises(RuntimeError):
    with files.atomic_open(path) as f:
      f.write("half")
      raise RuntimeError("interrupted")
  assert open(path).read() == "one\ntwo\n"
  assert os.listdir(tmp_path / "sub") == ["out.txt"]


def test_atomic_path_writes_directories_and_refuses_to_overwrite(tmp_path):
  path = str(tmp_path / "export")
  with files.atomic_path(path, overwrite=False) as tmp:
    os.makedirs(os.path.join(tmp, "variables"))
    assert not os.path.exists(path)
  assert os.path.isdir(os.path.join(path, "variables"))
  with pytest.raises(FileExistsError, match="exists already"):
    with files.atomic_path(path, overwrite=False):
      pass
  assert sorted(os.listdir(tmp_path)) == ["export"]


@pytest.mark.parametrize("directory", ["local", "ram://read-bytes"])
def test_read_bytes_of_an_absent_file_is_file_not_found_on_every_file_system(
    tmp_path, directory):
  # tf.io.gfile raises its own NotFoundError (ram://, gs://); callers catch one type.
  directory = str(tmp_path) if directory == "local" else directory
  with pytest.raises(FileNotFoundError, match="absent"):
    files.read_bytes(f"{directory}/absent")


def test_asking_whether_a_local_file_exists_loads_no_tensorflow(tmp_path):
  # tools/train.py --mode=eval asks for MODEL_DIR/params.yaml before it chooses the
  # Keras backend; TensorFlow's import would import Keras with its own.
  (tmp_path / "params.yaml").write_text("task: {}\n")
  script = ("import sys\nfrom bert_tf.utils import files\n"
            f"assert files.exists({str(tmp_path / 'params.yaml')!r})\n"
            f"assert not files.exists({str(tmp_path / 'absent')!r})\n"
            "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))\n")
  result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, check=True)
  assert result.stdout.strip() == "[]"
