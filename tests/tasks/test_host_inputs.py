"""Every task's host input (the host form of its data loader) without TensorFlow: the tasks import with
TensorFlow unimportable, read their TFRecords and dummy inputs into the batches the
tf.data inputs give, restore a saved position, and refuse in one line what needs
TensorFlow. Runs tests/host_input_tf_free_check.py in a subprocess, since this process
has TensorFlow."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import checkpoint_helpers
import finetuning_helpers
import host_input_helpers as helpers
import pretraining_fixtures as fx
import paths
from bert_tf import configs
from bert_tf import constants
from bert_tf.checkpoints import writing
from bert_tf.data.pipelines import batching
from bert_tf.data.pipelines import padding
from bert_tf.tasks import base


def _huggingface_classifier(directory):
  """A tiny BertForSequenceClassification folder (safetensors) and token ids; writes the
  logits of its model on TensorFlow to directory/tf_logits.npy."""
  model = checkpoint_helpers.tiny_task_model("classifier", seed=4)
  vocab = checkpoint_helpers.write_vocab(directory / "hf_vocab.txt",
                                         checkpoint_helpers.TINY.vocab_size)
  writing.save_huggingface(model, vocab, str(directory / "hf"))
  ids = np.random.default_rng(0).integers(5, checkpoint_helpers.TINY.vocab_size, (2, 9))
  np.save(directory / "token_ids.npy", ids.astype(np.int32))
  outputs = model({constants.INPUT_WORD_IDS: ids, constants.INPUT_MASK: np.ones_like(ids),
                   constants.INPUT_TYPE_IDS: np.zeros_like(ids)})
  np.save(directory / "tf_logits.npy", np.asarray(outputs["logits"]))
  return str(directory / "hf"), str(directory / "token_ids.npy")


@pytest.fixture(scope="module")
def tensorflow_free_run(tmp_path_factory):
  directory = tmp_path_factory.mktemp("host_inputs")
  shards, _ = helpers.write_pretraining_files(directory)
  files = {"pretraining": ",".join(shards),
           "squad": helpers.write_squad_file(directory),
           "vocab": fx.write_vocab(directory)}
  for name in helpers.FINETUNING_KINDS:
    files[name] = helpers.write_finetuning_file(directory, name)
  files["hf_folder"], files["token_ids"] = _huggingface_classifier(directory)
  files_json = str(directory / "files.json")
  with open(files_json, "w", encoding="utf-8") as f:
    json.dump(files, f)
  env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=paths.ROOT)
  result = subprocess.run(
      [sys.executable, os.path.join(paths.ROOT, "tests", "host_input_tf_free_check.py"),
       files_json, str(directory)], env=env, capture_output=True, text=True, timeout=600,
      check=False)
  assert result.returncode == 0, result.stderr[-4000:]
  found = json.loads(result.stdout.strip().splitlines()[-1])
  arrays = dict(np.load(str(directory / "batches.npz")))
  arrays["tf_logits"] = np.load(str(directory / "tf_logits.npy"))
  return files, found, arrays


def test_every_task_reads_and_restores_its_host_input_without_tensorflow(
    tensorflow_free_run):
  files, found, _ = tensorflow_free_run
  found = dict(found)
  assert found.pop("tensorflow") is True
  errors = {key: found.pop(key) for key in ("tsv", "converted")}
  assert set(found) == set(helpers.task_experiments(files))
  for case, values in found.items():
    assert values == {"restored": True, "rows": 3}, case
  assert errors["tsv"] == (
      "train_data.format 'tsv': reading raw task files needs tensorflow-text: featurize "
      "them with tools/create_finetuning_data.py first and read format tfrecord")


def test_host_batches_without_tensorflow_equal_the_tf_data_batches(tensorflow_free_run):
  files, _, arrays = tensorflow_free_run
  for case, data in helpers.task_experiments(files).items():
    experiment = configs.ExperimentConfig.from_dict(data, task_configs=base.task_configs())
    task = base.get_task(experiment)
    loader = task.data_loader(experiment.eval_data)
    dataset = loader.dataset()
    if constants.LABEL_IDS in dataset.element_spec:  # Fine-tuning: padded to buckets.
      bounds = padding.bucket_bounds(experiment.eval_data)
      dataset = dataset.map(lambda batch, b=bounds, f=loader.token_fills():
                            batching.pad_to_length_bucket(batch, b, f))
    for i, batch in enumerate(dataset.take(2)):
      for key, value in batch.items():
        np.testing.assert_array_equal(arrays[f"{case}/{i}/{key}"], value.numpy(),
                                      err_msg=f"{case} batch {i} {key}")
      assert {k.split("/")[2] for k in arrays if k.startswith(f"{case}/{i}/")} == set(batch)


def test_dynamic_masks_drawn_without_tensorflow_equal_the_tf_data_input_s(
    tensorflow_free_run):
  files, _, arrays = tensorflow_free_run
  experiment = configs.ExperimentConfig.from_dict(
      helpers.dynamic_masking_experiment(files), task_configs=base.task_configs())
  dataset = base.get_task(experiment).data_loader(experiment.train_data).dataset()
  for i, batch in enumerate(dataset.take(2)):
    for key, value in batch.items():
      np.testing.assert_array_equal(arrays[f"dynamic_masking/{i}/{key}"], value.numpy(),
                                    err_msg=f"batch {i} {key}")
  weights = arrays[f"dynamic_masking/0/{constants.MASKED_LM_WEIGHTS}"]
  assert weights.sum() > 0


def test_with_tensorflow_raw_task_files_featurize_into_the_tf_data_batches(tmp_path):
  vocab = finetuning_helpers.write_vocab(tmp_path / "vocab.txt")
  rows = ["the cat sat on the mat", "a dog", "john lives in paris", "good movie",
          "the red green blue home runs", "no", "yes a man walks home", "bad"]
  path = tmp_path / "train.tsv"
  path.write_text("text\tlabel\n" + "".join(f"{text}\t{i % 2}\n"
                                            for i, text in enumerate(rows)))
  data = {"format": "tsv", "input_path": str(path), "length_buckets": [4, 8]}
  experiment = finetuning_helpers.tiny_experiment(
      {"name": "sentence_prediction", "num_classes": 2}, data, vocab_file=vocab)
  task = base.get_task(experiment)
  eval_data = experiment.eval_data.replace(global_batch_size=3)
  bounds = padding.bucket_bounds(eval_data)
  loader = task.data_loader(eval_data)
  theirs = [{k: v.numpy() for k, v in batching.pad_to_length_bucket(
      batch, bounds, loader.token_fills()).items()} for batch in loader.dataset()]
  ours = list(task.data_loader(eval_data).host_batches())
  assert len(ours) == len(theirs) == 3
  for a, b in zip(ours, theirs):
    assert set(a) == set(b)
    for key in b:
      np.testing.assert_array_equal(a[key], b[key], err_msg=key)
  assert {b[constants.INPUT_WORD_IDS].shape[-1] for b in ours} <= set(bounds)


def test_a_hugging_face_classifier_converts_to_a_portable_checkpoint_and_restores_on_jax_without_tensorflow(
    tensorflow_free_run):
  """The converter in the JAX install (TensorFlow unimportable, KERAS_BACKEND=jax) writes
  ckpt-1.h5, not TensorFlow's ckpt-1.index, and the folder restores into its task's
  model with the logits of the Hugging Face model on TensorFlow."""
  _, found, arrays = tensorflow_free_run
  assert found["tensorflow"] is True
  assert found["converted"] == ["ckpt-1.h5", "config.yaml", "params.yaml", "vocab.txt"]
  np.testing.assert_allclose(arrays["converted/logits"], arrays["tf_logits"], atol=1e-5)
