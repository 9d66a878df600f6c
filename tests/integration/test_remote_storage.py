"""tools/train.py on the JAX engine where `import tensorflow` fails, against a GCS
emulator on 127.0.0.1 (tests/gcs_emulator.py; gcsfs through STORAGE_EMULATOR_HOST):
pretraining and a GLUE task (the records tools/create_finetuning_data.py writes) read
their data, vocab and init_checkpoint from the bucket and write params.yaml, summaries,
checkpoints and input positions there; a run killed after a checkpoint resumes from it
bit-exactly; and storage that is not served or does not answer is one error line, for
each kind of path, with nothing written locally. With TensorFlow installed, the package
reaches the emulator through gcsfs too (TensorFlow's gs:// client has no emulator
setting): a checkpoint in the bucket is read in ranged requests of 8 MiB, and the
converter reads a model_dir there and the exporter writes its SavedModel and TF Hub-style
pair there, which load and serve the run's model. The TensorFlow engine is tested in
one process on ram:// (tests/training/test_remote_model_dir.py).
"""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

import export_helpers
import gcs_emulator
from bench import checkpoint_io
import host_input_helpers as host_helpers
import paths
import process_helpers
from bert_tf.checkpoints import portable
from bert_tf.checkpoints import restore
from bert_tf.checkpoints import snapshots
from bert_tf.training import summaries
from bert_tf.utils import range_reads

pytestmark = pytest.mark.integration

TRAIN_TOOL = os.path.join(paths.ROOT, "tools", "train.py")
# Runs tools/train.py with TensorFlow (and, where the argument says so, gcsfs) unimportable.
_WITHOUT = ("import runpy, sys; [sys.modules.__setitem__(m, None) for m in sys.argv[1].split(',')]; "
            "sys.argv = sys.argv[2:]; runpy.run_path(sys.argv[0], run_name='__main__')")
STEPS = 8
KILL_AFTER = 4
_ENCODER = dict(vocab_size=100, hidden_size=32, num_layers=2, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=32, dropout_rate=0.1)
_DUMMY = dict(format="dummy", global_batch_size=8, seq_length=16, max_predictions_per_seq=4)


def _config(directory, steps, task=None, data=None, **sections):
  """A tiny experiment (pretraining on dummy data by default) with dropout and a
  checkpoint every 2 steps, as YAML; returns its path."""
  data = data or _DUMMY
  experiment = dict(
      task=task or dict(name="pretraining"),
      model=dict(encoder=_ENCODER),
      train_data=dict(data), eval_data=dict(data, is_training=False),
      optimizer=dict(learning_rate=1e-3, warmup_steps=2),
      trainer=dict(train_steps=steps, steps_per_loop=2, checkpoint_interval=2,
                   summary_interval=2, log_interval=2, max_to_keep=10), **sections)
  path = os.path.join(str(directory), f"{experiment['task']['name']}{steps}.yaml")
  with open(path, "w", encoding="utf-8") as f:
    yaml.safe_dump(experiment, f)
  return path


def _command(config, model_dir, environment, without):
  env = {k: v for k, v in os.environ.items()
         if k not in ("KERAS_BACKEND", "XLA_FLAGS", "STORAGE_EMULATOR_HOST")}
  env.update(environment, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=paths.ROOT)
  return ([sys.executable, "-c", _WITHOUT, without, TRAIN_TOOL, f"--experiment={config}",
           f"--model_dir={model_dir}", "--backend=jax"], env)


def _train(config, model_dir, cwd, environment, without="tensorflow"):
  command, env = _command(config, model_dir, environment, without)
  return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600,
                        cwd=str(cwd))


def _train_side_by_side(runs):
  """{name: CompletedProcess} of `_train(*args)` for each {name: args} of `runs`, the
  processes run at once."""
  started = {}
  for name, (config, model_dir, cwd, environment) in runs.items():
    command, env = _command(config, model_dir, environment, "tensorflow")
    started[name] = subprocess.Popen(command, env=env, cwd=str(cwd), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
  results = {}
  try:
    for name, process in started.items():
      stdout, stderr = process.communicate(timeout=600)
      results[name] = subprocess.CompletedProcess(process.args, process.returncode, stdout,
                                                  stderr)
  finally:
    process_helpers.kill_all(list(started.values()))
  return results


def _start(config, model_dir, cwd, environment):
  command, env = _command(config, model_dir, environment, "tensorflow")
  return subprocess.Popen(command, env=env, cwd=str(cwd), stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)


@pytest.fixture(name="emulator_log")
def _emulator_log(tmp_path_factory):
  """The file the emulator logs its requests to (bench.checkpoint_io.logged_requests
  reads it), outside tmp_path: tests check that a failed run left nothing there."""
  return str(tmp_path_factory.mktemp("emulator") / "emulator.log")


@pytest.fixture(name="emulator")
def _emulator(emulator_log):
  with gcs_emulator.serving_this_process(log_path=emulator_log) as serving:
    yield serving


def _bucket_and_cwd(tmp_path):
  """The emulator's bucket URL, and an empty folder to run the tools in (nothing may be
  written there)."""
  cwd = tmp_path / "cwd"
  cwd.mkdir()
  return f"gs://{gcs_emulator.BUCKET}", cwd


def _arrays(fs, remote, local_dir):
  local = os.path.join(str(local_dir), os.path.basename(remote))
  fs.get(remote, local)
  return portable.arrays(local)


def _exists(fs, path):
  """Whether `path` is in the bucket now (not in gcsfs's listing cache)."""
  fs.invalidate_cache()
  return fs.exists(path)


def _upload(fs, local_paths, directory):
  for path in local_paths:
    fs.put(str(path), f"{directory}/{os.path.basename(str(path))}")


def _trains_whole_and_killed_alike(fs, config, run, cwd, environment, tmp_path):
  """Trains `config` into run/whole in one go, and into run/killed killed (SIGKILL) once
  its checkpoint of step KILL_AFTER is in the bucket (which outlives the process) and
  rerun; asserts that the rerun resumed and that both end with equal arrays (weights,
  optimizer state, random state)."""
  whole = _train(config, f"{run}/whole", cwd, environment)
  assert whole.returncode == 0, whole.stdout[-2000:] + whole.stderr[-3000:]
  killed = f"{run}/killed"
  process = _start(config, killed, cwd, environment)
  deadline = time.time() + 600
  while not fs.exists(f"{killed}/ckpt-{KILL_AFTER}.h5"):
    assert process.poll() is None and time.time() < deadline
    fs.invalidate_cache()
    time.sleep(0.05)
  process.send_signal(signal.SIGKILL)
  process.wait()
  fs.invalidate_cache()
  assert not fs.exists(f"{killed}/ckpt-{STEPS}.h5")
  resumed = _train(config, killed, cwd, environment)
  assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
  assert f"Resumed from {killed}/ckpt-" in resumed.stdout
  name = os.path.basename(run)
  a = _arrays(fs, f"{run}/whole/ckpt-{STEPS}.h5", tmp_path / name / "whole")
  b = _arrays(fs, f"{killed}/ckpt-{STEPS}.h5", tmp_path / name / "killed")
  assert a.keys() == b.keys() and any(key.startswith("random_state/") for key in a)
  for key in a:
    np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_jax_runs_without_tensorflow_read_data_vocab_and_checkpoints_from_the_bucket_and_resume_bit_exactly(
    tmp_path, emulator):
  environment, fs = emulator
  bucket, cwd = _bucket_and_cwd(tmp_path)
  local = tmp_path / "local"
  local.mkdir()
  shards, _ = host_helpers.write_pretraining_files(local)
  vocab = local / "vocab.txt"
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                             + [f"w{i}" for i in range(95)]) + "\n")
  _upload(fs, shards, f"{bucket}/data")
  _upload(fs, [vocab], f"{bucket}/vocab")
  pretraining = _config(
      tmp_path, STEPS, tokenizer=dict(vocab_file=f"{bucket}/vocab/vocab.txt"),
      data=dict(format="tfrecord", input_path=f"{bucket}/data/data-*", global_batch_size=8,
                seq_length=host_helpers.SEQ, max_predictions_per_seq=host_helpers.PRED))
  _trains_whole_and_killed_alike(fs, pretraining, f"{bucket}/pretraining", cwd, environment,
                                 tmp_path)
  names = {name.split("/whole/", 1)[-1] for name in fs.find(f"{bucket}/pretraining/whole")}
  assert {"params.yaml", "ckpt-2.h5", f"ckpt-{STEPS}.h5"} <= names, names
  assert not [name for name in names if ".input" in name], names  # in the checkpoint
  assert not [name for name in names if ".tmp-" in name or "write-check" in name], names
  # The event file holds every step written (object stores cannot append: it is
  # uploaded whole after each flush).
  (event_file,) = fs.glob(f"{bucket}/pretraining/whole/train/events.out.tfevents.*")
  events = tmp_path / "events"
  events.mkdir()
  fs.get(event_file, str(events / os.path.basename(event_file)))
  assert [step for step, _ in summaries.read_scalars(str(events))["loss"]] == list(
      range(2, STEPS + 1, 2))

  # A GLUE task on the records tools/create_finetuning_data.py writes, warm-started
  # from the pretraining run in the bucket.
  _upload(fs, [host_helpers.write_finetuning_file(local, "sentence")], f"{bucket}/glue")
  glue = _config(
      tmp_path, STEPS,
      task=dict(name="sentence_prediction", num_classes=5,
                init_checkpoint=f"{bucket}/pretraining/whole"),
      data=dict(format="tfrecord", input_path=f"{bucket}/glue/sentence.tfrecord",
                global_batch_size=8, seq_length=host_helpers.FINETUNING_SEQ))
  _trains_whole_and_killed_alike(fs, glue, f"{bucket}/glue_run", cwd, environment, tmp_path)
  assert os.listdir(cwd) == []  # nothing written locally (no ./gs:/ folder)


HOOKS = os.path.join(paths.ROOT, "tests", "checkpoint_hooks_main.py")


def _start_hosts(config, model_dir, cwd, environment, held_part=None, count=2,
                 held_process=1, hook=("held_part", 3600)):
  """Starts tools/train.py as `count` jax.distributed processes on 127.0.0.1 (TensorFlow
  unimportable); with held_part=STEP, process `held_process` runs under `hook` (name,
  seconds) of tests/checkpoint_hooks_main.py for ckpt-STEP: by default it stops before
  marking its part of ckpt-STEP complete."""
  port = gcs_emulator.free_port()
  processes = []
  for index in range(count):
    command, env = _command(config, model_dir, environment, "tensorflow")
    if held_part and index == held_process:
      command = [sys.executable, HOOKS, hook[0], str(held_part), str(hook[1]),
                 "--without=tensorflow"] + command[command.index(TRAIN_TOOL) + 1:]
    env.update(KERAS_DISTRIBUTION_JOB_ADDRESSES=f"127.0.0.1:{port}",
               KERAS_DISTRIBUTION_NUM_PROCESSES=str(count),
               KERAS_DISTRIBUTION_PROCESS_ID=str(index))
    processes.append(subprocess.Popen(command, env=env, cwd=str(cwd), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
  return processes


def rerun_hosts_equal(config, runs, resumed_step, cwd, emulator, tmp_path, count=2):
  """Reruns the `count` processes of `config` into runs[1] (whose run was killed),
  asserting that each resumed at `resumed_step` and that its last checkpoint holds the
  arrays of the uninterrupted run runs[0] (weights, optimizer state, random state)."""
  environment, fs = emulator
  whole, killed = runs
  steps = yaml.safe_load(open(config, encoding="utf-8"))["trainer"]["train_steps"]
  outputs = process_helpers.finish_all(_start_hosts(config, killed, cwd, environment,
                                                    count=count))
  for output in outputs:
    assert f"Resumed from {killed}/ckpt-{resumed_step}.h5 at step {resumed_step}" in output, (
        output[-3000:])
  a = _arrays(fs, f"{whole}/ckpt-{steps}.h5", tmp_path / "whole")
  b = _arrays(fs, f"{killed}/ckpt-{steps}.h5", tmp_path / "killed")
  assert a.keys() == b.keys()
  for key in a:
    np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_gs_model_dir_without_gcsfs_is_one_line_naming_the_extra_and_writes_nothing(tmp_path):
  config = _config(tmp_path, 2)
  result = _train(config, "gs://bucket/run", tmp_path, {}, without="tensorflow,gcsfs")
  # The package alone: the extra bert_tf[gcs] would install TensorFlow too.
  assert _one_error_line(result, tmp_path, config).startswith(
      "model_dir: gs://bucket/run: gs:// paths without TensorFlow need gcsfs: pip install "
      "gcsfs (or -r requirements/gcs.txt)")


def test_model_dir_in_a_bucket_that_does_not_exist_is_one_line_saying_so(tmp_path, emulator):
  environment, _ = emulator
  config = _config(tmp_path, 2)
  result = _train(config, "gs://nosuchbucket/run", tmp_path, environment)
  assert _one_error_line(result, tmp_path, config) == (
      "model_dir: cannot write to gs://nosuchbucket/run: the bucket nosuchbucket does not "
      "exist")


# Each kind of path a run reads: (its setting, the experiment's sections that set it).
_READ_PATHS = {
    "train_data.input_path": lambda path: dict(data=dict(
        _DUMMY, format="tfrecord", input_path=f"{path}/data-*.tfrecord")),
    "task.init_checkpoint": lambda path: dict(task=dict(name="pretraining",
                                                        init_checkpoint=path)),
    "tokenizer.vocab_file": lambda path: dict(tokenizer=dict(vocab_file=f"{path}/vocab.txt")),
}


def _one_error_line(result, tmp_path, config):
  """The one `train: error:` line of a refused run, checking that it is the only error
  output, with no traceback, and that nothing was written beside the config."""
  assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-3000:]
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
  assert len(errors) == 1 and errors[0].startswith("train: error: "), result.stderr[-3000:]
  assert sorted(os.listdir(tmp_path)) == [os.path.basename(config)]
  return errors[0][len("train: error: "):]


@pytest.mark.parametrize("field", sorted(_READ_PATHS))
def test_remote_read_path_without_gcsfs_is_one_line_naming_setting_and_extra_and_writes_nothing(
    tmp_path, field):
  config = _config(tmp_path, 2, **_READ_PATHS[field]("gs://bucket/in"))
  result = _train(config, str(tmp_path / "run"), tmp_path, {}, without="tensorflow,gcsfs")
  line = _one_error_line(result, tmp_path, config)
  assert line.startswith(f"{field}: gs://bucket/in")
  assert "gs:// paths without TensorFlow need gcsfs: pip install gcsfs" in line


def test_a_storage_host_that_does_not_answer_is_one_line_naming_it_for_model_dir_and_each_read_path(
    tmp_path):
  """model_dir (written) and each kind of path a run reads, on a host whose port is
  closed: one line naming the setting and the host, and nothing written. The runs wait
  out the storage client's retries side by side (they sleep, mostly)."""
  if not gcs_emulator.available():
    pytest.skip("needs gcsfs (extra gcs)")
  with _closed_port() as port:
    environment = gcs_emulator.environment(f"http://127.0.0.1:{port}")
    runs = {}  # setting: (its folder, its config, its model_dir)
    for field in ["model_dir", *sorted(_READ_PATHS)]:
      folder = tmp_path / field
      folder.mkdir()
      if field == "model_dir":
        runs[field] = (folder, _config(folder, 2), "gs://bucket/run")
      else:
        runs[field] = (folder, _config(folder, 2, **_READ_PATHS[field]("gs://bucket/in")),
                       str(folder / "run"))
    results = _train_side_by_side(
        {field: (config, model_dir, folder, environment)
         for field, (folder, config, model_dir) in runs.items()})
  for field, (folder, config, _) in runs.items():
    line = _one_error_line(results[field], folder, config)
    if field == "model_dir":
      assert line.startswith("model_dir: cannot write to gs://bucket/run: "), line
    else:
      assert line.startswith(f"{field}: cannot read gs://bucket/in"), line
    assert f"127.0.0.1:{port}" in line, line


@pytest.mark.parametrize("field", sorted(_READ_PATHS))
def test_remote_read_path_in_a_bucket_that_does_not_exist_is_one_line_naming_it(
    tmp_path, emulator, field):
  environment, _ = emulator
  config = _config(tmp_path, 2, **_READ_PATHS[field]("gs://no-such-bucket/in"))
  result = _train(config, str(tmp_path / "run"), tmp_path, environment)
  line = _one_error_line(result, tmp_path, config)
  assert "gs://no-such-bucket/in" in line
  if field != "tokenizer.vocab_file":  # the vocab's file name is its own
    assert "no such bucket or folder" in line and "tensorflow" not in line


# A protocol no library serves; a bucket TensorFlow's gs:// client cannot reach here (no
# network: the host is not resolved; with one, the service refuses an unknown bucket).
@pytest.mark.parametrize("export_dir", ["nosuch://bucket/exports",
                                        "gs://no-such-bucket-bert-tf/exports"])
def test_export_to_storage_that_cannot_be_written_is_one_line_before_anything_is_read(
    tmp_path, export_dir):
  result = subprocess.run(
      [sys.executable, os.path.join(paths.ROOT, "tools", "export_saved_model.py"),
       f"--checkpoint={tmp_path}/no-checkpoint", f"--export_dir={export_dir}"],
      env=dict(os.environ, PYTHONPATH=paths.ROOT, TF_CPP_MIN_LOG_LEVEL="2"),
      capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
  assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
  (line,) = [line for line in result.stderr.splitlines() if ": error" in line]
  assert line.startswith(
      f"export_saved_model: error: --export_dir: cannot write to {export_dir}: "), line
  assert os.listdir(tmp_path) == []


@contextlib.contextmanager
def _closed_port():
  """A port of 127.0.0.1 that nothing answers on (bound, never listening)."""
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    yield s.getsockname()[1]


def test_a_checkpoint_in_the_bucket_is_read_in_one_ranged_request_per_8_mib(
    tmp_path, emulator, emulator_log):
  _, fs = emulator
  bucket, _ = _bucket_and_cwd(tmp_path)
  rng = np.random.default_rng(0)
  # Many small arrays, as a checkpoint holds (h5py reads each in pieces of its own).
  arrays = {f"items/encoder/layer_{i}/kernel": rng.standard_normal((128, 96)).astype(
      np.float32) for i in range(300)}
  arrays.update({f"optimizer/m/layer_{i}/kernel": rng.standard_normal((256, 256)).astype(
      np.float32) for i in range(100)})
  local = portable.write(str(tmp_path / "ckpt-5.h5"), snapshots.Snapshot(
      {"format": portable.FORMAT, "version": portable.VERSION, "step": 5}, arrays))
  path = f"{bucket}/run/ckpt-5.h5"
  fs.put(local, path)
  import gcsfs  # pylint: disable=g-import-not-at-top
  gcsfs.GCSFileSystem.clear_instance_cache()  # the file layer's, made for this emulator
  _, mark = checkpoint_io.logged_requests(emulator_log)
  assert restore.resolve_checkpoint(f"{bucket}/run") == path  # reads every array
  read = portable.arrays(path)
  range_reads.release_local_copy()
  requests, _ = checkpoint_io.logged_requests(emulator_log, mark)
  ranges = -(-os.path.getsize(local) // (8 << 20))
  assert len([r for r in requests if r[1].startswith("/download/")]) == ranges, requests
  assert len(requests) <= ranges + 16, requests
  assert read.keys() == arrays.keys()
  for key, value in arrays.items():
    np.testing.assert_array_equal(read[key], value, err_msg=key)


def _tool_with_tensorflow(name, args, environment, cwd):
  env = {k: v for k, v in os.environ.items()
         if k not in ("KERAS_BACKEND", "XLA_FLAGS", "STORAGE_EMULATOR_HOST")}
  env.update(environment, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=paths.ROOT)
  result = subprocess.run([sys.executable, os.path.join(paths.ROOT, "tools", name), *args],
                          env=env, capture_output=True, text=True, timeout=600, cwd=str(cwd))
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  return result


def _model_dir_in_bucket(fs, tmp_path, remote):
  """A tiny pretraining run's folder (ckpt-2.h5, params.yaml naming the vocab in the
  bucket, vocab.txt), written to tmp_path/model_dir and uploaded to `remote`; returns
  (its model, its config, the local folder, the local vocab)."""
  vocab = export_helpers.write_vocab(tmp_path / "vocab")
  config = export_helpers.experiment(f"{remote}/vocab.txt")
  model = export_helpers.build_model(config)
  local = tmp_path / "model_dir"
  portable.save(portable.path_for_step(str(local), 2), model.checkpoint_items, step=2)
  config.save(str(local / "params.yaml"))
  _upload(fs, [local / "ckpt-2.h5", local / "params.yaml", vocab], remote)
  return model, config, local, vocab


def test_export_reads_a_run_in_the_bucket_and_writes_the_saved_model_and_hub_pair_there(
    tmp_path, emulator):
  """The docs' `--checkpoint=gs://... --export_dir=gs://...`, with TensorFlow installed
  (whose own gs:// client does not reach the emulator): the SavedModel and the TF Hub-style
  pair are written through the file layer, and what is in the bucket loads and serves the
  run's model."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  environment, fs = emulator
  bucket, cwd = _bucket_and_cwd(tmp_path)
  remote = f"{bucket}/runs/sst2"
  model, _, _, vocab = _model_dir_in_bucket(fs, tmp_path, remote)
  exported = _tool_with_tensorflow(
      "export_saved_model.py", [f"--checkpoint={remote}", f"--export_dir={bucket}/exports/sst2",
                                f"--hub_dir={bucket}/hub/sst2"], environment, cwd)
  assert f"restored {remote}/ckpt-2.h5" in exported.stdout
  assert f"to {bucket}/exports/sst2/1 " in exported.stdout, exported.stdout
  fs.invalidate_cache()
  assert sorted(fs.ls(f"{bucket}/exports/sst2", detail=False)) == [
      f"{gcs_emulator.BUCKET}/exports/sst2/1"]  # no temporary folder left beside it
  fs.get(f"{bucket}/exports/sst2/1", str(tmp_path / "export"), recursive=True)
  fs.get(f"{bucket}/hub/sst2", str(tmp_path / "hub"), recursive=True)
  assert (tmp_path / "export" / "assets" / "vocab.txt").read_text(
      encoding="utf-8") == open(vocab, encoding="utf-8").read()

  # [CLS] the cat [MASK] on mat [SEP], padded: the served top-k logits are the model's.
  tokens = [line.strip() for line in open(vocab, encoding="utf-8")]
  ids = [tokens.index(t) for t in "[CLS] the cat [MASK] on mat [SEP]".split()]
  length = export_helpers.SEQ_LENGTH
  inputs = {"input_word_ids": np.array([ids + [0] * (length - len(ids))], np.int32),
            "input_mask": np.array([[1] * len(ids) + [0] * (length - len(ids))], np.int32),
            "input_type_ids": np.zeros((1, length), np.int32)}
  served = tf.saved_model.load(str(tmp_path / "export")).signatures["serve_token_ids"](
      **{k: tf.constant(v) for k, v in inputs.items()})
  logits = np.asarray(model(dict(inputs, masked_lm_positions=np.array([[3, 0, 0]], np.int32)),
                            training=False)["mlm_logits"])[0, 0]
  np.testing.assert_allclose(served["top_k_logits"].numpy()[0, 0],
                             np.sort(logits)[::-1][:5], rtol=1e-5, atol=1e-5)
  preprocessor = tf.saved_model.load(str(tmp_path / "hub" / "preprocessor"))
  encoder = tf.saved_model.load(str(tmp_path / "hub" / "encoder"))
  pooled = encoder(preprocessor(tf.constant(["the cat sat on the mat ."])))["pooled_output"]
  assert pooled.shape == (1, 32)
  assert os.listdir(cwd) == []


def test_conversion_reads_a_model_dir_in_the_bucket_through_the_file_layer(tmp_path, emulator):
  """With TensorFlow installed: the checkpoint, params.yaml and the vocab it names are
  read from the bucket; the conversion is that of the same model_dir read locally."""
  environment, fs = emulator
  bucket, cwd = _bucket_and_cwd(tmp_path)
  remote = f"{bucket}/model_dir"
  _, _, local, _ = _model_dir_in_bucket(fs, tmp_path, remote)
  for source, output in ((remote, "from_bucket"), (str(local), "from_local")):
    _tool_with_tensorflow("convert_checkpoint.py",
                          [f"--input={source}", f"--output_dir={tmp_path / output}"],
                          environment, cwd)
  a = portable.arrays(str(tmp_path / "from_bucket" / "ckpt-1.h5"), "items")
  b = portable.arrays(str(tmp_path / "from_local" / "ckpt-1.h5"), "items")
  assert a.keys() == b.keys() and len(a) > 10
  for key in a:
    np.testing.assert_array_equal(a[key], b[key], err_msg=key)
  assert os.listdir(cwd) == []
