"""Data, model_dir, init_checkpoint, vocab and export directory on remote storage on
the TensorFlow engine, in one process: TensorFlow's own gs://
client ignores STORAGE_EMULATOR_HOST, so its in-memory file system `ram://` stands for
remote storage (every write goes through bert_tf.utils.files and tf.io.gfile). The
JAX engine without TensorFlow is tested against a GCS emulator in
tests/integration/test_remote_storage.py.
"""

import os
import uuid

import pytest
import tensorflow as tf

import host_input_helpers as host_helpers
import trainer_helpers
from bert_tf.checkpoints import portable
from bert_tf.export import exporter
from bert_tf.training import experiments
from bert_tf.training import params_file
from bert_tf.training import summaries
from bert_tf.training import trainer as trainer_lib
from bert_tf.utils import file_systems
from bert_tf.utils import files


def _ram_dir():
  return f"ram://runs-{uuid.uuid4().hex[:8]}/run"


def _upload(local_paths, directory):
  """Copies local files into `directory`; returns their remote paths, in order."""
  remote = [f"{directory}/{os.path.basename(path)}" for path in local_paths]
  for source, target in zip(local_paths, remote):
    files.copy(source, target)
  return remote


def _experiment(steps, vocab, data):
  return trainer_helpers.tiny_experiment(
      steps=steps, seq=host_helpers.SEQ, predictions=host_helpers.PRED,
      train_data=dict(format="tfrecord", input_path=data)).override(
          {"tokenizer": {"vocab_file": vocab}})


@pytest.mark.slow  # three short trainings and an export: about 25 s
def test_data_model_dir_init_checkpoint_and_export_on_remote_storage_train_resume_and_serve(
    tmp_path):
  model_dir = _ram_dir()
  bucket = os.path.dirname(model_dir)
  vocab = f"{bucket}/vocab.txt"  # read remotely too
  with tf.io.gfile.GFile(vocab, "w") as f:
    f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                      + [f"w{i}" for i in range(95)]) + "\n")
  shards, _ = host_helpers.write_pretraining_files(tmp_path)
  data = ",".join(_upload(shards, f"{bucket}/data"))
  experiment = _experiment(2, vocab, f"{bucket}/data/data-*")
  trainer_lib.run_experiment(experiment, model_dir, "train")
  names = set(tf.io.gfile.listdir(model_dir))
  assert {"params.yaml", "ckpt-2.h5", "train/"} <= (names | {n + "/" for n in names}), names
  # The input position is in the checkpoint, read back (and verified) remotely.
  assert portable.read(f"{model_dir}/ckpt-2.h5").position["batches_read"] == 2
  assert not [n for n in names if ".tmp" in n or n.startswith(".write-check")]
  assert portable.checkpoints_in(model_dir) == [f"{model_dir}/ckpt-2.h5"]
  assert summaries.read_scalars(f"{model_dir}/train")  # TensorBoard events there
  assert params_file.recorded_params(model_dir) is not None

  resumed = _experiment(4, vocab, data)
  logged = []
  trainer_lib.run_experiment(resumed, model_dir, "train", log_fn=logged.append)
  assert any(f"Resumed from {model_dir}/ckpt-2.h5 at step 2" in line for line in logged)
  # The input position came back from model_dir (no skipping of consumed batches).
  assert not any("skipped the" in line for line in logged), logged
  assert portable.read(f"{model_dir}/ckpt-4.h5").step == 4

  # A GLUE-style task warm-started from the remote model_dir, on remote records.
  (glue,) = _upload([host_helpers.write_finetuning_file(tmp_path, "sentence")],
                    f"{bucket}/glue")
  tuned_dir = f"{bucket}/tuned"
  tuned = experiments.experiment_from_dict(trainer_helpers.tiny_experiment_dict(
      steps=2, seq=host_helpers.FINETUNING_SEQ,
      task=dict(name="sentence_prediction", num_classes=5, init_checkpoint=model_dir),
      train_data=dict(format="tfrecord", input_path=glue),
      eval_data=dict(format="tfrecord", input_path=glue)))
  logged = []
  trainer_lib.run_experiment(tuned, tuned_dir, "train", log_fn=logged.append)
  assert portable.checkpoints_in(tuned_dir) == [f"{tuned_dir}/ckpt-2.h5"]

  # The SavedModel is written to the remote export directory and serves from there.
  exported = exporter.export_from_checkpoint(model_dir, f"{model_dir}/params.yaml",
                                             f"{bucket}/export", kind="encoder")
  assert exported == f"{bucket}/export/1"
  assert tf.io.gfile.listdir(f"{bucket}/export") == ["1"]  # no temporary left
  served = tf.saved_model.load(exported).signatures["serving_default"]
  outputs = served(tf.constant(["w1 w2 w3"]))
  assert outputs["pooled_output"].shape == (1, 32)


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
