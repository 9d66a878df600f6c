"""What a portable checkpoint says about itself, checked before it is acted on
(bert_tf.checkpoints.manifest): its version, names, shapes and dtypes, in files of
version 5 and of the versions before it."""

import json
import logging
import tracemalloc

import h5py
import numpy as np
import pytest

import checkpoint_helpers
from bert_tf.checkpoints import array_io
from bert_tf.checkpoints import checksums
from bert_tf.checkpoints import manifest
from bert_tf.checkpoints import portable
from bert_tf.checkpoints import portable_restore
from bert_tf.checkpoints import restore
from bert_tf.checkpoints import snapshots


def _save(directory, step):
  model = checkpoint_helpers.tiny_model(heads=False)
  return portable.write(portable.path_for_step(str(directory), step),
                        snapshots.snapshot(model.checkpoint_items, step=step))


def _set_version(path, version):
  with h5py.File(path, "r+") as f:
    f.attrs["version"] = version


def test_a_flipped_bit_in_the_version_is_damage_and_the_run_falls_back_not_newer(
    tmp_path, caplog):
  older = _save(tmp_path, 1)
  newer = _save(tmp_path, 2)
  _set_version(newer, portable.VERSION ^ 2)
  with pytest.raises(portable.DamagedCheckpointError,
                     match=f"{newer} is unreadable .*version attribute differs"):
    portable.read(newer)
  with caplog.at_level(logging.WARNING):
    assert restore.resolve_checkpoint(str(tmp_path)) == older
  assert any(newer in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("written,flipped", [(4, 0), (4, 5), (4, 12), (3, 2), (3, 1), (2, 3)])
def test_a_flipped_bit_in_an_earlier_versions_attribute_is_damage(tmp_path, written,
                                                                   flipped):
  path = _save(tmp_path, 1)
  {4: checkpoint_helpers.rewrite_as_version_4, 3: checkpoint_helpers.rewrite_as_version_3,
   2: checkpoint_helpers.rewrite_as_version_2}[written](path)
  assert portable.read(path).step == 1
  _set_version(path, flipped)
  with pytest.raises(portable.DamagedCheckpointError, match=f"{path} is unreadable"):
    portable.read(path)


def test_a_manifest_that_fails_its_checksum_or_differs_from_the_file_is_damage(tmp_path):
  path = _save(tmp_path, 1)
  with h5py.File(path, "r+") as f:
    f.attrs[manifest.MANIFEST_CRC] = np.uint32(int(f.attrs[manifest.MANIFEST_CRC]) ^ 1)
  with pytest.raises(portable.DamagedCheckpointError, match="manifest fails its checksum"):
    portable.read(path)
  path = _save(tmp_path, 2)
  name = "items/encoder/embeddings/word_embeddings"
  _rewrite_manifest(path, lambda record: record["arrays"][name].update(shape=[7, 5]))
  with pytest.raises(portable.DamagedCheckpointError,
                     match=f"{name} is <f4 \\(99, 32\\) in the file, <f4 \\(7, 5\\) in its"):
    portable.read(path)


def _rewrite_manifest(path, change):
  """Applies `change` to the manifest record of the file at `path` and writes it back
  with a CRC32C that matches (a crafted file)."""
  with h5py.File(path, "r+") as f:
    record = json.loads(f[manifest.MANIFEST][()].tobytes())
    change(record)
    del f[manifest.MANIFEST]
    arrays = {name: manifest.Entry(**entry) for name, entry in record["arrays"].items()}
    manifest.write(f, record["attrs"], arrays, record["links"])


def test_a_crafted_shape_beyond_the_files_size_is_refused_before_any_allocation(tmp_path):
  path = _save(tmp_path, 1)
  name = "items/encoder/crafted"
  with h5py.File(path, "r+") as f:  # 1 TiB declared, nothing stored
    f.create_dataset(name, shape=(2**31, 128), dtype=np.float32, chunks=(1, 128))
  _rewrite_manifest(path, lambda record: record["arrays"].update(
      {name: {"dtype": "<f4", "shape": [2**31, 128], "restore": "float32", "crc32c": 0}}))
  tracemalloc.start()
  try:
    with pytest.raises(portable.DamagedCheckpointError,
                       match=f"{name} declares shape \\(2147483648, 128\\) of float32 "
                             "\\(1099511627776 bytes\\), more than the file holds"):
      portable.read(path)
    peak = tracemalloc.get_traced_memory()[1]
  finally:
    tracemalloc.stop()
  assert peak < 4 << 20


def test_an_array_of_another_shape_than_the_models_is_refused_before_its_allocation(
    tmp_path, monkeypatch):
  path = _save(tmp_path, 1)
  name = "items/encoder/embeddings/word_embeddings"
  with h5py.File(path, "r+") as f:  # a consistent file of another vocab: not damaged
    del f[name]
    f.create_dataset(name, data=np.zeros((7, 32), np.float32))
  _rewrite_manifest(path, lambda record: record["arrays"][name].update(
      shape=[7, 32], crc32c=checksums.crc32c(np.zeros((7, 32), np.float32))))
  assert portable.read(path).arrays[name].shape == (7, 32)
  allocated = []
  allocate = array_io._allocate  # pylint: disable=protected-access
  monkeypatch.setattr(array_io, "_allocate", lambda shape, *args, **kwargs: (
      allocated.append(tuple(shape)), allocate(shape, *args, **kwargs))[1])
  model = checkpoint_helpers.tiny_model(heads=False)
  with pytest.raises(portable.PortableCheckpointError,
                     match=f"{path}: {name}: shape \\(7, 32\\) in the checkpoint, "
                           "\\(99, 32\\) in the model") as raised:
    portable_restore.restore_items(path, model.checkpoint_items)
  assert not isinstance(raised.value, portable.DamagedCheckpointError)
  assert (7, 32) not in allocated


def test_an_earlier_versions_array_named_in_no_utf8_is_damage(tmp_path):
  path = _save(tmp_path, 1)
  checkpoint_helpers.rewrite_as_version_4(path)
  with h5py.File(path, "r+") as f:
    f["items/encoder"][b"\xffpooler"] = f["items/encoder/pooler/bias"]
  with pytest.raises(portable.DamagedCheckpointError, match="is not UTF-8 text"):
    portable.read(path)
