"""What a portable checkpoint proves about itself (bert_tf.checkpoints.portable): each
array's CRC32C checked as it is read, each variable stored once, the files of earlier
versions still read (with one line saying they are unverified)."""

import logging
import os
import re

import h5py
import numpy as np
import pytest

import checkpoint_helpers
from bert_tf.checkpoints import checksums
from bert_tf.checkpoints import manifest
from bert_tf.checkpoints import portable
from bert_tf.checkpoints import readable
from bert_tf.checkpoints import restore
from bert_tf.checkpoints import snapshots
from bert_tf.training import trained_model

WORD_EMBEDDINGS = "embeddings/word_embeddings"


def _save(directory, step, model=None, position=None):
  model = model or checkpoint_helpers.tiny_model()
  path = portable.path_for_step(str(directory), step)
  return portable.write(path, snapshots.snapshot(model.checkpoint_items, step=step,
                                                position=position))


def test_a_flipped_bit_in_an_array_is_an_error_naming_the_checkpoint_and_the_array(
    tmp_path):
  path = _save(tmp_path, 3)
  name = "items/encoder/transformer_layer_0/attention/query/kernel"
  with h5py.File(path, "r") as f:
    written = manifest.header(f, portable.FORMAT, os.path.getsize(path)).arrays
    assert name in f and {"step", name} <= set(written)
  checkpoint_helpers.flip_bit(path, name, bit=5)
  with pytest.raises(portable.PortableCheckpointError,
                     match=f"Checkpoint {path} fails its checksum at {name} "):
    portable.check_readable(path)
  with pytest.raises(portable.PortableCheckpointError, match="fails its checksum"):
    restore.restore_items(path, checkpoint_helpers.tiny_model(seed=1).checkpoint_items)


@pytest.mark.parametrize("name", ["step", "input/batches_read"])
def test_a_flipped_bit_in_the_step_or_the_position_fails_the_checkpoint(tmp_path, name):
  path = _save(tmp_path, 4, position={"batches_read": 4, "global_batch_size": 8})
  assert portable.read(path).position == {"batches_read": 4, "global_batch_size": 8}
  checkpoint_helpers.flip_bit(path, name)
  with pytest.raises(portable.PortableCheckpointError, match=f"fails its checksum at {name}"):
    portable.read(path)


def test_a_directory_resolves_past_a_checkpoint_failing_its_checksum_with_one_line(
    tmp_path, caplog):
  older = _save(tmp_path, 2)
  newer = _save(tmp_path, 4)
  checkpoint_helpers.flip_bit(newer, f"items/encoder/{WORD_EMBEDDINGS}")
  with caplog.at_level(logging.WARNING):
    assert restore.resolve_checkpoint(str(tmp_path)) == older
  [line] = [r.getMessage() for r in caplog.records if "checksum" in r.getMessage()]
  assert line.startswith(f"Checkpoint {newer} fails its checksum at items/encoder/"
                         f"{WORD_EMBEDDINGS} ")
  assert line.endswith(f"; using the newest readable checkpoint {older} instead")
  checkpoint_helpers.flip_bit(older, "step")
  with pytest.raises(readable.UnreadableCheckpointError, match="fails its checksum at step"):
    restore.resolve_checkpoint(str(tmp_path))


def test_a_checkpoint_of_a_newer_format_is_refused_in_one_line_not_skipped(tmp_path):
  _save(tmp_path, 2)
  newer = _save(tmp_path, 4)
  checkpoint_helpers.rewrite_as_version(newer, portable.VERSION + 1)
  message = (f"{newer} was written by a newer bert_tf (checkpoint format version "
             f"{portable.VERSION + 1}; this one reads versions 1 to {portable.VERSION})")
  with pytest.raises(portable.NewerCheckpointError, match=re.escape(message)):
    portable.read(newer)
  with pytest.raises(portable.NewerCheckpointError, match=re.escape(message)):
    restore.resolve_checkpoint(str(tmp_path))


def test_a_tied_variable_is_stored_once_and_restored_to_both_owners(tmp_path):
  saved = checkpoint_helpers.tiny_model(seed=0)
  path = _save(tmp_path, 1, saved)
  with h5py.File(path, "r") as f:
    encoder, head = f[f"items/encoder/{WORD_EMBEDDINGS}"], f[f"items/masked_lm/{WORD_EMBEDDINGS}"]
    assert encoder.id == head.id  # one dataset under two names
  fresh = checkpoint_helpers.tiny_model(seed=1)
  restore.restore_items(path, fresh.checkpoint_items, ("masked_lm",))
  for a, b in zip(saved.checkpoint_items["masked_lm"].variables,
                  fresh.checkpoint_items["masked_lm"].variables):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
  stored = portable.arrays(path, "items")
  assert stored[f"masked_lm/{WORD_EMBEDDINGS}"] is stored[f"encoder/{WORD_EMBEDDINGS}"]


def test_a_tied_variable_costs_its_bytes_once(tmp_path):
  model = checkpoint_helpers.tiny_model()
  once = _save(tmp_path, 1, model)
  twice = str(tmp_path / "ckpt-2.h5")
  portable.save(twice, model.checkpoint_items, step=2)
  checkpoint_helpers.rewrite_as_version_2(twice)
  table = portable.arrays(once)[f"items/encoder/{WORD_EMBEDDINGS}"].nbytes
  assert os.path.getsize(twice) - os.path.getsize(once) >= table


def test_a_checkpoint_of_an_earlier_version_restores_with_one_unverified_line(
    tmp_path, caplog):
  saved = checkpoint_helpers.tiny_model(seed=0)
  path = _save(tmp_path, 5, saved)
  checkpoint_helpers.rewrite_as_version_2(path)
  with h5py.File(path, "r") as f:  # both copies of the tied table, no checksums
    assert f[f"items/encoder/{WORD_EMBEDDINGS}"].id != f[f"items/masked_lm/{WORD_EMBEDDINGS}"].id
    assert checksums.CRC_ATTR not in f[f"items/encoder/{WORD_EMBEDDINGS}"].attrs
  fresh = checkpoint_helpers.tiny_model(seed=1)
  with caplog.at_level(logging.WARNING):
    restore.restore_items(str(tmp_path), fresh.checkpoint_items,
                          ("encoder", "masked_lm", "next_sentence"))
    restore.restore_items(path, fresh.checkpoint_items, ("encoder",))
  lines = [r.getMessage() for r in caplog.records if "unverified" in r.getMessage()]
  assert lines == [f"Checkpoint {path} was written by an earlier version without "
                   "checksums: read unverified"]
  for a, b in zip(saved.weights, fresh.weights):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
  assert portable.read(path).step == 5


def test_the_exporter_falls_back_past_a_damaged_newest_checkpoint_or_refuses_it_named(
    tmp_path, caplog):
  from bert_tf.tasks import base as task_base  # pylint: disable=g-import-not-at-top
  import trainer_helpers  # pylint: disable=g-import-not-at-top
  experiment = trainer_helpers.tiny_experiment()
  saved = trained_model.build(task_base.get_task(experiment))
  for step in (2, 4):
    portable.save(portable.path_for_step(str(tmp_path), step), saved.trained_items, step=step)
  damaged = str(tmp_path / "ckpt-4.h5")
  name = "items/next_sentence/next_sentence/dense/kernel"
  checkpoint_helpers.flip_bit(damaged, name, bit=1)
  with caplog.at_level(logging.WARNING):
    model = trained_model.model_from_checkpoint(experiment, str(tmp_path))
  assert f"Checkpoint {damaged} fails its checksum at {name} " in caplog.text
  for a, b in zip(saved.weights, model.weights):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
  with pytest.raises(portable.DamagedCheckpointError,
                     match=f"Checkpoint {damaged} fails its checksum at {name} "):
    trained_model.model_from_checkpoint(experiment, damaged)


def test_the_follower_s_crcs_of_arrays_in_chunks_equal_the_direct_ones():
  rng = np.random.default_rng(0)
  arrays = [rng.standard_normal(n).astype(np.float32) for n in (1 << 18, 300, 1 << 19)]
  with checksums.Follower() as follower:
    running = []
    for array in arrays:
      crc, data = checksums.Running(), memoryview(array.view(np.uint8))
      for start in range(0, array.nbytes, 100_000):
        follower.add(crc, data[start:start + 100_000])
      running.append(follower.end(crc))
    values = [crc.value() for crc in reversed(running)][::-1]
  assert values == [checksums.crc32c(array) for array in arrays]
  assert checksums.crc32c(np.frombuffer(b"123456789", np.uint8)) == 0xE3069283  # RFC 3720
