"""A portable checkpoint on remote storage is read from a local copy fetched once
(bert_tf.utils.range_reads.local_copy, in ranges: tests/utils/test_range_reads.py),
however many times a restore opens it (the check that it reads in full, the items)."""

import uuid

import numpy as np
import pytest

import checkpoint_helpers
from bert_tf.checkpoints import portable
from bert_tf.checkpoints import restore
from bert_tf.utils import file_systems
from bert_tf.utils import range_reads


@pytest.fixture(name="remote_dir")
def _remote_dir(monkeypatch):
  """A folder on memory://, served by fsspec as where TensorFlow is absent."""
  monkeypatch.setattr(file_systems, "_tensorflow_gfile", lambda: None)
  yield f"memory://checkpoints-{uuid.uuid4().hex[:8]}/run"
  range_reads.release_local_copy()


def test_a_restore_from_remote_storage_fetches_the_checkpoint_once(
    remote_dir, monkeypatch):
  saved, fresh = checkpoint_helpers.tiny_model(seed=1), checkpoint_helpers.tiny_model(seed=2)
  path = portable.save(portable.path_for_step(remote_dir, 3), saved.checkpoint_items, step=3)
  fetched = []
  fetch = range_reads.fetch
  monkeypatch.setattr(range_reads, "fetch",
                      lambda *args: fetched.append(args[0]) or fetch(*args))

  items = ("encoder", "masked_lm", "next_sentence")
  assert restore.restore_items(remote_dir, fresh.checkpoint_items, items) == dict.fromkeys(
      items, path)
  assert restore.checkpoint_children(path) >= set(items)
  assert fetched == [path]
  for a, b in zip(saved.weights, fresh.weights):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
