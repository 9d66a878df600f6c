"""The tests' GCS emulator stored on disk (tests/gcs_emulator.py, as bench/checkpoint_stall.py
runs it): an upload of several chunks arrives whole, and deleted objects leave nothing on
disk."""

import os

import pytest

import gcs_emulator

_CHUNK = 5 * 2**20  # gcsfs's smallest upload chunk: uploads above it are resumable


def _disk_bytes(directory):
  return sum(os.path.getsize(os.path.join(folder, name))
             for folder, _, names in os.walk(directory) for name in names
             if name != ".meta")


def test_on_disk_emulator_takes_a_chunked_upload_whole_and_keeps_no_deleted_objects(
    tmp_path, monkeypatch):
  if not gcs_emulator.available():
    pytest.skip("needs gcp-storage-emulator and gcsfs (extras test and gcs)")
  storage = tmp_path / "storage"
  storage.mkdir()
  content = os.urandom(3 * _CHUNK + 12345)
  local = tmp_path / "upload.bin"
  local.write_bytes(content)
  with gcs_emulator.running(directory=str(storage)) as host:
    for key, value in gcs_emulator.environment(host).items():
      monkeypatch.setenv(key, value)
    import gcsfs  # pylint: disable=g-import-not-at-top
    fs = gcsfs.GCSFileSystem(skip_instance_cache=True)
    bucket = gcs_emulator.BUCKET
    fs.put(str(local), f"{bucket}/a/upload.bin", chunksize=_CHUNK)
    fs.copy(f"{bucket}/a/upload.bin", f"{bucket}/b/upload.bin")
    assert fs.cat(f"{bucket}/b/upload.bin") == content
    assert _disk_bytes(storage) == 2 * len(content)  # the two objects, no upload left
    fs.rm(f"{bucket}/a/upload.bin")
    fs.rm(f"{bucket}/b/upload.bin")
    assert _disk_bytes(storage) == 0
