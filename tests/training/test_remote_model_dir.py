"""A remote model_dir on the TensorFlow engine, in one process: TensorFlow's own gs://
client ignores STORAGE_EMULATOR_HOST, so its in-memory file system `ram://` stands for
remote storage (every write goes through bert_tf.utils.files and tf.io.gfile). The
JAX engine without TensorFlow is tested against a GCS emulator in
tests/integration/test_remote_storage.py.
"""

import os
import uuid

import pytest
import tensorflow as tf

import trainer_helpers
from bert_tf.checkpoints import portable
from bert_tf.export import exporter
from bert_tf.training import params_file
from bert_tf.training import summaries
from bert_tf.training import trainer as trainer_lib
from bert_tf.utils import file_systems


def _ram_dir():
  return f"ram://runs-{uuid.uuid4().hex[:8]}/run"


def _experiment(steps, vocab):
  return trainer_helpers.tiny_experiment(steps=steps).override(
      {"tokenizer": {"vocab_file": vocab}})


@pytest.mark.slow  # two short trainings and an export: about 15 s
def test_pretraining_writes_to_remote_model_dir_resumes_and_exports_from_it(tmp_path):
  model_dir = _ram_dir()
  vocab = f"{os.path.dirname(model_dir)}/vocab.txt"  # read remotely too
  with tf.io.gfile.GFile(vocab, "w") as f:
    f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                      + [f"w{i}" for i in range(95)]) + "\n")
  experiment = _experiment(2, vocab)
  trainer_lib.run_experiment(experiment, model_dir, "train")
  names = set(tf.io.gfile.listdir(model_dir))
  assert {"params.yaml", "ckpt-2.h5", "ckpt-2.input.index", "train/"} <= (
      names | {n + "/" for n in names}), names
  assert not [n for n in names if ".tmp" in n or n.startswith(".write-check")]
  assert portable.checkpoints_in(model_dir) == [f"{model_dir}/ckpt-2.h5"]
  assert summaries.read_scalars(f"{model_dir}/train")  # TensorBoard events there
  assert params_file.recorded_params(model_dir) is not None

  resumed = _experiment(4, vocab)
  logged = []
  trainer_lib.run_experiment(resumed, model_dir, "train", log_fn=logged.append)
  assert any(f"Resumed from {model_dir}/ckpt-2.h5 at step 2" in line for line in logged)
  # The input position came back from model_dir (no skipping of consumed batches).
  assert not any("skipped the" in line for line in logged), logged
  with portable._open(f"{model_dir}/ckpt-4.h5") as f:  # pylint: disable=protected-access
    assert int(f.attrs["step"]) == 4

  # TensorFlow's ram:// renames no directory, so the SavedModel goes to a local folder.
  exported = exporter.export_from_checkpoint(model_dir, f"{model_dir}/params.yaml",
                                             str(tmp_path / "export"), kind="encoder")
  assert tf.io.gfile.exists(os.path.join(exported, "saved_model.pb"))


def test_unreachable_model_dir_is_one_storage_error_naming_path_and_host_before_any_write(
    tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  experiment = trainer_helpers.tiny_experiment(steps=2)
  with pytest.raises(file_systems.StorageError) as raised:
    trainer_lib.run_experiment(experiment, "gs://no-such-bucket-bert-tf/run", "train")
  message = str(raised.value)
  # Here: "... Could not resolve host: www.googleapis.com ..."; with a network, the
  # answer of the storage service (no such bucket, no credentials).
  assert message.startswith("model_dir: cannot write to gs://no-such-bucket-bert-tf/run: ")
  assert "\n" not in message.strip()
  assert os.listdir(tmp_path) == []
