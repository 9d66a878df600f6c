"""The file-system choice (bert_tf.utils.file_systems, asked through bert_tf.utils.files)
where TensorFlow is absent: local paths through the os module, remote ones through fsspec
(its in-memory `memory://` here), and one StorageError naming the extra for a protocol
nothing installed serves."""

import os
import tempfile
import uuid

import fsspec
from fsspec.implementations import memory
import h5py
import numpy as np
import pytest

from bert_tf.checkpoints import portable
from bert_tf.utils import file_systems
from bert_tf.utils import files
from bert_tf.utils import optional


from bert_tf.utils import range_reads


@pytest.fixture(name="without_tensorflow")
def _without_tensorflow(monkeypatch):
  monkeypatch.setattr(file_systems, "_tensorflow_gfile", lambda: None)


def _memory_dir():
  return f"memory://bert-tf-{uuid.uuid4().hex[:8]}/run"


def test_protocol_tells_remote_paths_from_local_ones():
  assert [files.protocol(p) for p in ("gs://b/x", "s3://b", "file:///tmp/x", "runs/x",
                                      "/abs/x")] == ["gs", "s3", "", "", ""]


def test_without_tensorflow_local_paths_use_os_and_remote_ones_fsspec(without_tensorflow):
  del without_tensorflow
  assert files.file_system("/tmp/x") is file_systems.LocalFiles
  assert isinstance(files.file_system("memory://b/x"), file_systems.FsspecFiles)


@pytest.mark.parametrize("path,extra,package", [("gs://bucket/run", "gcs", "gcsfs"),
                                                ("s3://bucket/run", "s3", "s3fs")])
@pytest.mark.parametrize("tensorflow_installed", [True, False])
def test_unserved_protocol_without_tensorflow_is_one_storage_error_naming_the_fitting_install(
    without_tensorflow, monkeypatch, path, extra, package, tensorflow_installed):
  """Without TensorFlow the install named is the package alone (the extra would bring
  TensorFlow back); where TensorFlow is installed, the extra."""
  del without_tensorflow

  def missing(protocol):
    raise ImportError(f"Install the package for {protocol}")
  monkeypatch.setattr(fsspec, "filesystem", missing)
  monkeypatch.setattr(optional, "tensorflow_installed", lambda: tensorflow_installed)
  with pytest.raises(file_systems.StorageError) as raised:
    files.check_writable(path)
  message = str(raised.value)
  assert message.startswith(f"model_dir: {path}: ") and f"need {package}: " in message
  if tensorflow_installed:
    assert f"pip install 'bert_tf[{extra}]'" in message
  else:
    assert f"pip install {package} (or -r requirements/{extra}.txt)" in message
    assert "bert_tf[" not in message
  assert "\n" not in message


def test_unknown_protocol_without_tensorflow_is_one_storage_error(without_tensorflow):
  del without_tensorflow
  with pytest.raises(file_systems.StorageError, match="no installed file system serves nosuch://"):
    files.check_writable("nosuch://bucket/run")


def test_atomic_writes_listing_and_rename_on_fsspec_leave_no_temporary(without_tensorflow):
  del without_tensorflow
  directory = _memory_dir()
  files.check_writable(directory)
  files.write_lines(f"{directory}/a.txt", ["one", "two"])
  files.write_lines(f"{directory}/a.txt", ["three"])  # replaces
  assert files.read_bytes(f"{directory}/a.txt") == b"three\n"
  assert files.listdir(directory) == ["a.txt"]
  assert files.glob(f"{directory}/*.txt") == [f"{directory}/a.txt"]
  with pytest.raises(RuntimeError):
    with files.atomic_open(f"{directory}/b.txt") as f:
      f.write("half")
      raise RuntimeError("killed mid-write")
  assert files.listdir(directory) == ["a.txt"]


def test_a_file_copied_to_its_name_is_written_though_storage_fails_to_delete_the_temporary(
    without_tensorflow, monkeypatch):
  """An object store renames by a copy and a delete: once the copy is in place the
  file is whole, and storage lost before the delete fails neither the write (a
  checkpoint is committed) nor spends more calls on the temporary name."""
  del without_tensorflow
  directory = _memory_dir()
  files.check_writable(directory)
  memory = type(fsspec.filesystem("memory"))
  calls = []

  def lost(self, path, *args, **kwargs):
    calls.append(path)
    raise ConnectionRefusedError(111, "Connection refused")

  with monkeypatch.context() as patched:
    patched.setattr(memory, "rm", lost)
    patched.setattr(memory, "exists", lambda self, path, **kwargs: calls.append(path))
    files.write_lines(f"{directory}/a.txt", ["whole"])
  assert files.read_bytes(f"{directory}/a.txt") == b"whole\n"
  left = [name for name in files.listdir(directory) if name != "a.txt"]
  assert [name.startswith(".a.txt.tmp-") for name in left] == [True]
  assert calls == [f"{directory}/{left[0]}"], calls  # the delete alone, tried once


def test_portable_checkpoint_round_trips_through_remote_directory_leaving_no_local_file(
    without_tensorflow, tmp_path, monkeypatch):
  del without_tensorflow
  staging = tmp_path / "staging"
  staging.mkdir()
  monkeypatch.setattr(tempfile, "tempdir", str(staging))

  class Variable:  # what portable.save reads of a Keras variable
    def __init__(self, path, value):
      self.path, self.value = path, value

    def numpy(self):
      return self.value

  class Item:
    variables = [Variable("encoder/w", np.arange(6, dtype=np.float32).reshape(2, 3))]

  directory = _memory_dir()
  path = portable.save(portable.path_for_step(directory, 3), {"encoder": Item()}, step=3)
  assert portable.checkpoints_in(directory) == [path]
  assert files.listdir(directory) == ["ckpt-3.h5"]  # no temporary left
  assert portable.is_portable(path)
  assert portable.item_shapes(path, "encoder") == {"encoder/w": (2, 3)}
  local = str(tmp_path / "copy.h5")
  files.copy(path, local)
  with h5py.File(local, "r") as f:
    np.testing.assert_array_equal(f["items/encoder/encoder/w"][()], Item.variables[0].value)
  # The local file h5py wrote is gone; the copy it read stays until released.
  assert [name.endswith("-ckpt-3.h5") for name in os.listdir(staging)] == [True]
  range_reads.release_local_copy()
  assert os.listdir(staging) == []


def test_file_urls_are_local_and_read_like_plain_paths(tmp_path):
  path = tmp_path / "a.txt"
  path.write_bytes(b"abc")
  url = f"file://{path}"
  assert files.is_local(url) and not files.is_remote(url)
  assert files.local_path(url) == files.local_path(str(path)) == str(path)
  assert files.absolute_path(url) == str(path)
  assert files.size(url) == 3
  with files.open_input(url) as f:
    assert f.read() == b"abc"
  assert files.expand_patterns(f"file://{tmp_path}/*.txt") == [str(path)]


def test_remote_globs_sizes_and_reads_go_through_fsspec_without_tensorflow(without_tensorflow):
  del without_tensorflow
  directory = _memory_dir()
  for name in ("b.rec", "a.rec", "c.txt"):
    files.write_lines(f"{directory}/{name}", [name])
  assert files.expand_patterns(f"{directory}/*.rec,{directory}/a.rec") == [
      f"{directory}/a.rec", f"{directory}/b.rec"]
  assert not files.is_local(f"{directory}/a.rec")
  assert files.absolute_path(f"{directory}/a.rec") == f"{directory}/a.rec"
  assert files.size(f"{directory}/a.rec") == len("a.rec\n")
  with files.open_input(f"{directory}/a.rec") as f:
    assert f.read() == b"a.rec\n"
  with pytest.raises(FileNotFoundError, match=f"input_path: no file matches {directory}/x"):
    files.expand_patterns(f"{directory}/x*")


def test_with_tensorflow_gs_paths_on_an_emulator_go_through_gcsfs(monkeypatch):
  pytest.importorskip("gcsfs")
  monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")
  assert isinstance(files.file_system("gs://bucket/run"), file_systems.FsspecFiles)
  assert not isinstance(files.file_system("ram://run"), file_systems.FsspecFiles)
  assert not isinstance(files.file_system("/tmp/run"), file_systems.FsspecFiles)
  monkeypatch.delenv("STORAGE_EMULATOR_HOST")
  assert not isinstance(files.file_system("gs://bucket/run"), file_systems.FsspecFiles)


def test_a_listing_of_a_missing_folder_or_of_a_file_is_empty(without_tensorflow, tmp_path):
  del without_tensorflow
  directory = _memory_dir()
  files.write_lines(f"{directory}/a.txt", ["one"])
  for folder in (directory + "/missing", f"{directory}/a.txt", str(tmp_path / "missing")):
    assert files.listdir(folder) == [], folder
  assert files.listdir(directory) == ["a.txt"]


class _Questions(memory.MemoryFileSystem):
  """An in-memory file system that counts the questions about one path (each a listing
  on GCS beside the object's request) that the file layer asks it directly."""

  cachable = False
  asked = 0
  _depth = 0

  def __getattribute__(self, name):
    method = super().__getattribute__(name)
    if name.startswith("__") or not callable(method):
      return method

    def counted(*args, **kwargs):
      outermost = not type(self)._depth
      if outermost and name in ("info", "exists", "isdir", "isfile", "size", "ls"):
        type(self).asked += 1
      type(self)._depth += 1
      try:
        return method(*args, **kwargs)
      finally:
        type(self)._depth -= 1
    return counted


def test_an_object_store_renames_reads_and_uploads_a_file_by_its_name_alone(tmp_path):
  store = file_systems.FsspecFiles(_Questions(), "memory://", object_store=True)
  directory = _memory_dir()
  with store.GFile(f"{directory}/.a.tmp", "wb") as f:
    f.write(b"one")
  local = tmp_path / "b.txt"
  local.write_bytes(b"two")
  _Questions.asked = 0
  store.rename(f"{directory}/.a.tmp", f"{directory}/a.txt", overwrite=True)
  store.copy(str(local), f"{directory}/b.txt", overwrite=True)
  assert store.read_bytes(f"{directory}/a.txt") == b"one"
  assert store.read_bytes(f"{directory}/b.txt") == b"two"
  assert _Questions.asked == 0
  assert sorted(store.listdir(directory)) == ["a.txt", "b.txt"]
  assert _Questions.asked == 1  # the listing itself
