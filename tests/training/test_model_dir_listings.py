"""What a resume asks of remote storage (bert_tf.utils.files over gcsfs, a GCS emulator
on 127.0.0.1): a run on gs:// that resumes and saves a checkpoint lists the names under
its model_dir at most four times (the lock's own, the newest checkpoint's choice, and
the deletion of old checkpoints after the save), and reads its checkpoint in one
request. Every question about one path (exists, isdir, size) costs GCS a listing beside
the object's request; the run asks none it can do without.

The engine is the Trainer's fake (tests/training/test_trainer_with_fake_engine.py): the
requests are the Trainer's, the checkpoint saver's and the file layer's, not a model's.
"""

import os
import urllib.parse

import fsspec
import pytest

import gcs_emulator
import test_trainer_with_fake_engine as fake
from bench import checkpoint_io

_MAX_LISTINGS = 4


@pytest.fixture(name="emulator_log")
def _emulator_log(tmp_path):
  log = str(tmp_path / "emulator.log")
  with gcs_emulator.serving_this_process(log_path=log):
    yield log


def _listings(requests, model_dir):
  """The listing requests among `requests` of the names under `model_dir`."""
  key = model_dir.split("/", 3)[3]
  found = []
  for method, path in requests:
    url = urllib.parse.urlparse(path)
    prefix = urllib.parse.parse_qs(url.query).get("prefix", [""])[0]
    if method == "GET" and url.path.endswith("/o") and prefix.startswith(key):
      found.append(prefix)
  return found


def test_a_resume_on_gs_lists_its_model_dir_at_most_four_times(emulator_log):
  model_dir = f"gs://{gcs_emulator.BUCKET}/run"
  settings = dict(steps_per_loop=2, checkpoint_interval=2, summary_interval=2)
  first, _ = fake._trainer(model_dir, steps_total=2, **settings)  # pylint: disable=protected-access
  first.run("train")
  # A new process: nothing of the first run's listings is known.
  fsspec.filesystem("gs").invalidate_cache()
  _, mark = checkpoint_io.logged_requests(emulator_log)
  resumed, _ = fake._trainer(model_dir, steps_total=4, **settings)  # pylint: disable=protected-access
  resumed.run("train")
  requests, _ = checkpoint_io.logged_requests(emulator_log, mark)
  assert resumed.restored_from == f"{model_dir}/ckpt-2.h5"
  listings = _listings(requests, model_dir)
  assert len(listings) <= _MAX_LISTINGS, listings
  checkpoint_reads = [path for method, path in requests
                      if "ckpt-2.h5" in urllib.parse.unquote(path) and method == "GET"]
  assert len(checkpoint_reads) == 1, checkpoint_reads
  fs = fsspec.filesystem("gs")
  fs.invalidate_cache()
  assert sorted(os.path.basename(p) for p in fs.ls(model_dir) if "ckpt-" in p) == [
      "ckpt-2.h5", "ckpt-4.h5"]


def test_a_run_that_takes_model_dirs_lock_again_deletes_from_a_new_listing(tmp_path):
  """What a run listed while it held the lock is forgotten when it gives the lock up:
  another run may have saved and deleted checkpoints meanwhile."""
  model_dir = str(tmp_path / "run")
  settings = dict(steps_per_loop=2, checkpoint_interval=2, max_to_keep=2)
  first, _ = fake._trainer(model_dir, steps_total=4, **settings)  # pylint: disable=protected-access
  first.train()  # ckpt-2, ckpt-4
  other, _ = fake._trainer(model_dir, steps_total=8, **settings)  # pylint: disable=protected-access
  other.train()  # resumes at 4; ckpt-6, ckpt-8, deleting ckpt-2 and ckpt-4
  first.train(train_steps=6)  # its room made from what model_dir holds now
  assert sorted(name for name in os.listdir(model_dir) if name.startswith("ckpt-")) == [
      "ckpt-6.h5", "ckpt-8.h5"]
