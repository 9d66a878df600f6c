"""Training on the JAX engine (bert_tf.training.jax_engine) through tools/train.py, and
what the TensorFlow side reads from it: the exporter and the TensorFlow engine's warm
start.

JAX runs in subprocesses (tests/engine_worker.py, tools/train.py --backend=jax): this
process imported Keras with the TensorFlow backend.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import export_helpers
import trainer_helpers
from bert_tf import configs
from bert_tf.checkpoints import portable
from bert_tf.checkpoints import restore
from bert_tf.export import exporter
from bert_tf.export import fill_mask_serving
from bert_tf.training import backends
from bert_tf.training import experiments
from bert_tf.training import trainer as trainer_lib
import paths

ROOT = paths.ROOT
TRAIN_TOOL = os.path.join(ROOT, "tools", "train.py")
WORKER = os.path.join(ROOT, "tests", "engine_worker.py")
TEXTS = ["the [MASK] sat on the mat .", "hello [MASK] , who [MASK] in paris ?", "no mask"]


def _env(**extra):
  """This environment without a Keras backend or XLA flags, plus `extra`."""
  env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
  env.update(TF_CPP_MIN_LOG_LEVEL="2", **extra)
  return env


def _run(args, env, timeout=900):
  result = subprocess.run([sys.executable, *args], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  return result


def _worker(*args, timeout=900, backend="jax"):
  """Runs a tests/engine_worker.py command on `backend`; returns its RESULT."""
  result = _run([WORKER, *map(str, args)], _env(KERAS_BACKEND=backend), timeout)
  line = [l for l in result.stdout.splitlines() if l.startswith("RESULT ")][-1]
  return json.loads(line[len("RESULT "):])


def _pretraining_yaml(directory, steps=4, dropout=0.1, **runtime):
  """A tiny fill-mask-exportable pretraining experiment on dummy data, as YAML."""
  vocab = export_helpers.write_vocab(directory)
  config = export_helpers.experiment(vocab).override({
      "model": {"encoder": {"dropout_rate": dropout, "attention_dropout_rate": dropout}},
      "train_data": {"format": "dummy", "global_batch_size": 8},
      "eval_data": {"format": "dummy", "global_batch_size": 8, "drop_remainder": False},
      "optimizer": {"learning_rate": 1e-3, "warmup_steps": 1},
      "trainer": {"train_steps": steps, "steps_per_loop": 2, "checkpoint_interval": 2,
                  "summary_interval": 2, "log_interval": 2, "max_to_keep": 2},
      "runtime": dict({"seed": 3}, **runtime)})
  path = os.path.join(str(directory), "experiment.yaml")
  config.save(path)
  return path


@pytest.fixture(scope="module")
def jax_run(tmp_path_factory):
  """A 4-step JAX pretraining run made by tools/train.py --backend=jax: (model_dir,
  the tool's stdout)."""
  directory = tmp_path_factory.mktemp("jax_run")
  model_dir = str(directory / "run")
  result = _run([TRAIN_TOOL, f"--experiment={_pretraining_yaml(directory)}",
                 f"--model_dir={model_dir}", "--backend=jax"], _env())
  return model_dir, result.stdout


@pytest.mark.slow  # tools/train.py in a process
def test_train_tool_on_jax_names_the_backend_first_and_in_params_yaml(jax_run):
  model_dir, stdout = jax_run
  assert stdout.splitlines()[0] == "Keras backend jax: 1 cpu device(s) in 1 process(es)"
  assert experiments.experiment_from_yaml(
      os.path.join(model_dir, "params.yaml")).runtime.backend == "jax"
  # max_to_keep 2 of the checkpoints at steps 2 and 4, each holding its input position.
  assert sorted(f for f in os.listdir(model_dir) if f.startswith("ckpt-")) == [
      "ckpt-2.h5", "ckpt-4.h5"]
  assert portable.read(os.path.join(model_dir, "ckpt-4.h5")).position["batches_read"] == 4
  assert restore.resolve_checkpoint(model_dir) == os.path.join(model_dir, "ckpt-4.h5")


@pytest.mark.slow  # export and serving in processes
def test_jax_trained_model_exports_a_raw_text_fill_mask_answering_as_on_jax(jax_run, tmp_path):
  model_dir, _ = jax_run
  texts_path = tmp_path / "texts.json"
  texts_path.write_text(json.dumps(TEXTS))
  answers_path = tmp_path / "jax_answers.npz"
  assert _worker("fill_mask", model_dir, texts_path, answers_path) == {"backend": "jax"}
  jax_answers = np.load(answers_path)
  export = exporter.export_from_checkpoint(
      model_dir, os.path.join(model_dir, "params.yaml"), str(tmp_path / "export"), top_k=3)
  served = tf.saved_model.load(export).signatures["serving_default"](text=tf.constant(TEXTS))
  np.testing.assert_array_equal(served[fill_mask_serving.MASK_COUNT].numpy(), [1, 2, 0])
  np.testing.assert_array_equal(served[fill_mask_serving.MASK_POSITIONS].numpy(),
                                jax_answers["positions"])
  valid = np.arange(jax_answers["positions"].shape[1])[None, :] < np.array([1, 2, 0])[:, None]
  np.testing.assert_array_equal(served[fill_mask_serving.TOP_K_IDS].numpy()[valid],
                                jax_answers["top_k_ids"][valid])
  np.testing.assert_allclose(served[fill_mask_serving.TOP_K_PROBABILITIES].numpy()[valid],
                             jax_answers["top_k_probabilities"][valid], atol=2e-6)


@pytest.mark.slow  # tools/train.py in a process
def test_tensorflow_trainer_warm_starts_its_encoder_from_a_jax_run(jax_run, tmp_path):
  model_dir, _ = jax_run
  config = experiments.experiment_from_yaml(os.path.join(model_dir, "params.yaml")).override(
      {"task": {"init_checkpoint": model_dir}, "runtime": {"backend": ""}})
  trainer = trainer_lib.Trainer(config, str(tmp_path / "tf_run"), log_fn=lambda line: None)
  trainer.initialize()
  assert trainer.initialized_from == {"encoder": os.path.join(model_dir, "ckpt-4.h5")}
  saved = portable.arrays(os.path.join(model_dir, "ckpt-4.h5"), "items")
  for variable in trainer.model.encoder.trainable_variables:
    np.testing.assert_array_equal(variable.numpy(), saved[f"encoder/{variable.path}"],
                                  err_msg=variable.path)
  trainer.train(train_steps=1)  # And it trains on from there.


@pytest.mark.slow  # trainings on both engines
def test_jax_model_restores_a_tensorflow_checkpoint_through_its_object_graph(tmp_path):
  vocab = export_helpers.write_vocab(tmp_path)
  config = export_helpers.experiment(vocab)
  config.save(str(tmp_path / "params.yaml"))
  model = export_helpers.build_model(config)
  prefix = export_helpers.save_checkpoint(model, tmp_path)
  _worker("weights", prefix, tmp_path / "jax.npz")
  restored = np.load(tmp_path / "jax.npz")
  encoder = model.checkpoint_items["encoder"].trainable_variables
  assert sorted(restored.files) == sorted(v.path for v in encoder)
  for variable in encoder:
    np.testing.assert_array_equal(restored[variable.path], variable.numpy(),
                                  err_msg=variable.path)


@pytest.mark.slow  # two trainings
def test_gradient_accumulation_on_jax_equals_one_batch(tmp_path):
  assert _worker("accumulation", tmp_path)["accumulated_weights"] < 1e-6


@pytest.mark.slow  # tools/train.py in processes
def test_the_same_yaml_runs_on_jax_and_tpu_strategy_is_a_one_line_error(tmp_path):
  # The shipped experiments say mirrored: on JAX, data parallel over the local devices.
  config = _pretraining_yaml(tmp_path, steps=2, distribution_strategy="mirrored",
                             num_cpu_devices=2)
  stdout = _run([TRAIN_TOOL, f"--experiment={config}", "--backend=jax",
                 f"--model_dir={tmp_path / 'run'}"], _env()).stdout
  assert stdout.splitlines()[0] == "Keras backend jax: 2 cpu device(s) in 1 process(es)"
  assert "with JAX (2 cpu device(s), 1 process(es))" in stdout
  tpu = subprocess.run([sys.executable, TRAIN_TOOL, f"--experiment={config}",
                        "--backend=jax", "--distribution_strategy=tpu",
                        f"--model_dir={tmp_path / 'tpu'}"], env=_env(), capture_output=True,
                       text=True, timeout=600, cwd=ROOT)
  assert tpu.returncode == 1
  assert tpu.stderr.strip().splitlines()[-1].startswith(
      "train: error: runtime.distribution_strategy=tpu is TensorFlow's TPUStrategy")
  # This process's Keras runs on TensorFlow.
  with pytest.raises(configs.ConfigError, match="KERAS_BACKEND=jax"):
    trainer_lib.run_experiment(trainer_helpers.tiny_experiment().override(
        {"runtime": {"backend": "jax"}}), "unused")


@pytest.mark.slow  # three trainings
def test_dynamic_masking_on_jax_reads_the_host_input_and_resumes_at_its_position(tmp_path):
  import pretraining_fixtures as fx  # pylint: disable=g-import-not-at-top
  records = str(tmp_path / "pretrain.tfrecord")
  fx.write_record_file(records, num_documents=40)
  data = {"format": "tfrecord", "input_path": records, "global_batch_size": 8,
          "seq_length": 32, "max_predictions_per_seq": 5, "dynamic_masking": True}
  config = experiments.experiment_from_dict(trainer_helpers.tiny_experiment_dict(
      steps=2, seq=32, predictions=5, train_data=data,
      tokenizer={"vocab_file": fx.write_vocab(tmp_path)},
      model={"encoder": {"vocab_size": len(fx.VOCAB)}}))
  path = str(tmp_path / "experiment.yaml")
  config.save(path)
  model_dir = str(tmp_path / "run")
  assert np.isfinite(_worker("train", path, model_dir, "train")["loss"])
  # Its position is in the checkpoint, as the TensorFlow engine's is.
  assert portable.read(os.path.join(model_dir, "ckpt-2.h5")).position["batches_read"] == 2
  config.override({"trainer": {"train_steps": 4}}).save(path)
  _worker("train", path, model_dir, "train")
  assert os.path.exists(os.path.join(model_dir, "ckpt-4.h5"))


@pytest.mark.slow  # a TSV fine-tuning run over several length buckets
def test_fine_tuning_from_tsv_compiles_the_jax_step_once_per_length_bucket(tmp_path):
  result = _worker("compilations", tmp_path)
  assert result["steps"] == 20
  # Sentences of 1-30 pieces, batches padded to 8, 16 or 32: at most three shapes.
  assert 1 <= result["step_traces"] <= 3


def test_backend_is_read_from_the_yaml_overrides_and_flag_without_keras(tmp_path):
  path = tmp_path / "e.yaml"
  path.write_text("runtime:\n  backend: jax\n")
  assert backends.requested_backend(None, [str(path)]) == "jax"
  assert backends.requested_backend(None, [str(path)], "runtime.backend=tensorflow") == (
      "tensorflow")
  assert backends.requested_backend("pretraining_bert_tiny", (), None, "jax") == "jax"
  assert backends.requested_backend("pretraining_bert_tiny") == ""
  code = ("import sys; from bert_tf.training import backends; "
          f"backends.requested_backend('pretraining_bert_tiny', [{str(path)!r}]); "
          "print('keras' in sys.modules or 'tensorflow' in sys.modules)")
  assert _run(["-c", code], _env()).stdout.strip() == "False"


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_every_experiment_kind_trains_and_evaluates_on_either_engine(tmp_path, backend):
  results = _worker("kinds", tmp_path, backend=backend)
  assert sorted(results) == sorted(["pretraining", "glue_mrpc", "squad_v1.1", "squad_v2.0",
                                    "ner", "swag", "distillation"])
  for name, report in results.items():
    assert np.isfinite(report["loss"]), name
    assert any(key.startswith("eval/") for key in report), name
    assert os.path.exists(tmp_path / name / "ckpt-2.h5"), name


@pytest.mark.slow
def test_data_parallel_on_two_devices_and_two_processes_match_one_device(tmp_path):
  # Without dropout: the processes read the global batch's rows in another order.
  one = _pretraining_yaml(tmp_path / "one", dropout=0.0)
  two = _pretraining_yaml(tmp_path / "two", dropout=0.0, num_cpu_devices=2,
                          distribution_strategy="mirrored")
  hosts = _pretraining_yaml(tmp_path / "hosts_config", dropout=0.0,
                            distribution_strategy="multi_worker_mirrored")
  _run([TRAIN_TOOL, f"--experiment={one}", "--backend=jax",
        f"--model_dir={tmp_path / 'one' / 'run'}"], _env())
  stdout = _run([TRAIN_TOOL, f"--experiment={two}", "--backend=jax",
                 f"--model_dir={tmp_path / 'two' / 'run'}"], _env()).stdout
  assert stdout.splitlines()[0] == "Keras backend jax: 2 cpu device(s) in 1 process(es)"
  # Two processes of one device each on 127.0.0.1, jax.distributed over gloo.
  port = 23000 + os.getpid() % 2000
  processes = [subprocess.Popen(
      [sys.executable, TRAIN_TOOL, f"--experiment={hosts}", "--backend=jax",
       "--mode=train_and_eval", f"--model_dir={tmp_path / 'hosts'}"], cwd=ROOT,
      stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT, text=True,
      env=_env(KERAS_DISTRIBUTION_JOB_ADDRESSES=f"127.0.0.1:{port}",
               KERAS_DISTRIBUTION_NUM_PROCESSES="2", KERAS_DISTRIBUTION_PROCESS_ID=str(i)))
               for i in range(2)]
  outputs = [p.communicate(timeout=900)[0] for p in processes]
  assert [p.returncode for p in processes] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
  assert "Keras backend jax: 2 cpu device(s) in 2 process(es)" in outputs[0]
  # Each process evaluates the whole eval input on its own device: the same metrics.
  evaluations = [[line for line in output.splitlines() if line.startswith("Evaluation")]
                 for output in outputs]
  assert len(evaluations[0]) == 1 and evaluations[0] == evaluations[1]
  reference = portable.arrays(str(tmp_path / "one" / "run" / "ckpt-4.h5"), "items")
  for run in (tmp_path / "two" / "run", tmp_path / "hosts"):
    got = portable.arrays(str(run / "ckpt-4.h5"), "items")
    for key in reference:
      np.testing.assert_allclose(got[key], reference[key], atol=1e-5, err_msg=f"{run}: {key}")
