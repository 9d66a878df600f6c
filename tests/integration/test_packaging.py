"""bert_tf as an installed library: the wheel's contents, its console commands, extras.

The slow tests build the wheel, install it into a fresh virtual environment (no access
to this checkout or to the test environment's packages) and run the commands from
another directory, as a user would: after `pip install .`, and without TensorFlow after
`pip install -r requirements/jax.txt` and `pip install --no-deps` (the JAX route).
"""

import ast
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
TOOLS = ROOT / "tools"
# Tools without a console command: the checkout's own set-up, a reference generator that
# needs torch in a separate environment, and the quickstart, which runs the other tools
# from the checkout and writes beside them.
NOT_COMMANDS = {"setup_and_run", "make_hf_reference_outputs", "quickstart"}


def console_scripts():
  """setup.py's CONSOLE_SCRIPTS: command name -> module in tools/."""
  tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
  for node in tree.body:
    if isinstance(node, ast.Assign) and any(
        getattr(target, "id", None) == "CONSOLE_SCRIPTS" for target in node.targets):
      return ast.literal_eval(node.value)
  raise AssertionError("setup.py defines no CONSOLE_SCRIPTS")


def defined_functions(path: pathlib.Path):
  tree = ast.parse(path.read_text(encoding="utf-8"))
  return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_every_tool_is_a_console_command_running_its_run_function():
  scripts = console_scripts()
  tools = {p.stem for p in TOOLS.glob("*.py") if p.stem != "__init__"}
  assert set(scripts.values()) == tools - NOT_COMMANDS
  assert all(name.startswith("bert-tf-") for name in scripts)
  for module in scripts.values():
    source = (TOOLS / f"{module}.py").read_text(encoding="utf-8")
    assert "run" in defined_functions(TOOLS / f"{module}.py"), module
    # `python tools/<module>.py` runs the very function the command runs.
    assert source.rstrip().endswith('if __name__ == "__main__":\n  run()'), module


def test_tfds_format_without_tensorflow_datasets_names_the_extra(monkeypatch):
  from bert_tf.data.task_files import tfds_glue
  # A None entry makes `import tensorflow_datasets` raise ImportError, as when absent.
  monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)
  with pytest.raises(ImportError, match=r'pip install "bert_tf\[tfds\]"') as raised:
    tfds_glue.read_tfds_glue("glue/mrpc", "train")
  assert "\n" not in str(raised.value)


def _run(argv, cwd, env):
  process = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace", check=False)
  assert process.returncode == 0, f"{' '.join(map(str, argv))}:\n{process.stdout[-6000:]}"
  return process.stdout


def _build_wheel(source: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
  """Builds the wheel from a copy of the checkout's distribution files (the build writes
  build/ and *.egg-info/ beside setup.py)."""
  for name in ("setup.py", "pyproject.toml", "README.md", "MANIFEST.in"):
    shutil.copy2(ROOT / name, source / name)
  for name in ("bert_tf", "official_configs", "tools", "requirements"):
    shutil.copytree(ROOT / name, source / name,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
  argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)]
  try:
    import setuptools  # pylint: disable=import-outside-toplevel,unused-import
    argv.insert(4, "--no-build-isolation")  # Builds offline with the setuptools at hand.
  except ImportError:
    pass
  _run(argv, cwd=out, env=_clean_env())
  (wheel,) = out.glob("bert_tf-*.whl")
  return wheel


def _clean_env():
  """The environment without this checkout or the test environment on the import path."""
  env = {k: v for k, v in os.environ.items()
         if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
  env["TF_CPP_MIN_LOG_LEVEL"] = "2"
  return env


@pytest.fixture(scope="module", name="built")
def _built(tmp_path_factory):
  """The wheel, built once for the module from a copy of the checkout: (the wheel's
  path, the copy's folder)."""
  source, dist = (tmp_path_factory.mktemp(name) for name in ("source", "dist"))
  return _build_wheel(source, dist), source


def _fresh_venv(tmp: pathlib.Path):
  """An empty virtual environment under tmp.

  Returns:
    (its python, its bin folder, an environment whose PATH finds its commands first, an
    empty working folder outside the checkout).
  """
  venv, work = tmp / "venv", tmp / "work"
  work.mkdir()
  env = _clean_env()
  _run([sys.executable, "-m", "venv", str(venv)], cwd=work, env=env)
  bin_dir = venv / "bin"
  env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
  return bin_dir / "python", bin_dir, env, work


@pytest.mark.slow
def test_the_wheel_installs_configs_and_commands_into_a_fresh_environment(built):
  wheel, source = built
  with tempfile.TemporaryDirectory(prefix="bert_tf_wheel_") as tmp:
    python, bin_dir, env, work = _fresh_venv(pathlib.Path(tmp))

    with zipfile.ZipFile(wheel) as archive:
      names = set(archive.namelist())
      entry_points = next(archive.read(n).decode() for n in names
                          if n.endswith(".dist-info/entry_points.txt"))
    for folder in ("experiments", "models"):
      shipped = {n.rsplit("/", 1)[1] for n in names
                 if n.startswith(f"bert_tf/official_configs/{folder}/")}
      assert shipped == {p.name for p in (ROOT / "official_configs" / folder).glob("*.yaml")}
    for command, module in console_scripts().items():
      assert f"{command} = bert_tf.tools.{module}:run" in entry_points

    _run([python, "-m", "pip", "install", "-q", str(wheel)], cwd=work, env=env)

    overrides = ",".join([
        "train_data.format=dummy", "train_data.global_batch_size=2",
        "train_data.seq_length=16", "train_data.max_predictions_per_seq=2",
        "trainer.train_steps=2"])
    output = _run([bin_dir / "bert-tf-train", "--experiment=pretraining_bert_tiny",
                   f"--model_dir={work / 'model'}", f"--params_override={overrides}"],
                  cwd=work, env=env)
    assert "step 2/2" in output
    assert (work / "model" / "params.yaml").is_file()
    assert list((work / "model" / "train").iterdir()), "no TensorBoard summaries written"
    version = _run([bin_dir / "tensorboard", "--version"], cwd=work, env=env)
    assert re.search(r"^2\.\d+\.\d+$", version, re.MULTILINE), version

    # An editable install of the same sources maps bert_tf.tools and the configs onto
    # the checkout's tools/ and official_configs/.
    _run([python, "-m", "pip", "install", "-q", "--no-deps", "-e", str(source)], cwd=work,
         env=env)
    shown = _run([python, "-c", "from bert_tf.tools import train; "
                  "from bert_tf.training import experiments; "
                  "print(train.__file__); print(experiments.experiment_path('glue_mrpc'))"],
                 cwd=work, env=env).split()
    assert shown[-2:] == [str(source / "tools" / "train.py"),
                          str(source / "official_configs" / "experiments" / "glue_mrpc.yaml")]


@pytest.fixture(scope="module")
def jax_route(tmp_path_factory, built):
  """The README's install for JAX alone, with its route to gs://: requirements/jax.txt
  and requirements/gcs.txt, then the wheel with --no-deps, in a fresh virtual
  environment; TensorFlow stays absent.

  Returns:
    (its bin folder, an environment whose PATH finds its commands first, an empty
    working folder outside the checkout).
  """
  wheel = built[0]
  python, bin_dir, env, work = _fresh_venv(tmp_path_factory.mktemp("jax_route"))
  _run([python, "-m", "pip", "install", "-q", "-r", ROOT / "requirements" / "jax.txt",
        "-r", ROOT / "requirements" / "gcs.txt"], cwd=work, env=env)
  _run([python, "-m", "pip", "install", "-q", "--no-deps", str(wheel)], cwd=work, env=env)
  absent = subprocess.run([python, "-c", "import tensorflow"], cwd=work, env=env,
                          capture_output=True, text=True, check=False)
  assert absent.returncode != 0 and "No module named 'tensorflow'" in absent.stderr
  return bin_dir, env, work


def _jax_pretraining_overrides(steps, **data):
  return ",".join([
      *(f"train_data.{key}={value}" for key, value in data.items()),
      "train_data.global_batch_size=4", "train_data.seq_length=32",
      "train_data.max_predictions_per_seq=5", f"trainer.train_steps={steps}",
      "trainer.steps_per_loop=2", "trainer.checkpoint_interval=2",
      "model.encoder.vocab_size=100"])


@pytest.mark.slow
def test_the_jax_route_trains_checkpoints_and_resumes_without_tensorflow(jax_route):
  """bert-tf-train --backend=jax reads the tools' TFRecords (written here, with
  TensorFlow), checkpoints, and a longer rerun resumes."""
  import pretraining_fixtures  # pylint: disable=import-outside-toplevel
  bin_dir, env, work = jax_route
  records = work / "pretrain.tfrecord"
  pretraining_fixtures.write_record_file(str(records), num_documents=40)

  def train(steps):
    overrides = _jax_pretraining_overrides(steps, input_path=records)
    return _run([bin_dir / "bert-tf-train", "--backend=jax",
                 "--experiment=pretraining_bert_tiny", f"--model_dir={work / 'model'}",
                 f"--params_override={overrides}"], cwd=work, env=env)
  assert "step 4/4" in train(4)
  assert (work / "model" / "ckpt-4.h5").is_file()
  resumed = train(6)
  assert f"Resumed from {work / 'model'}/ckpt-4.h5 at step 4" in resumed
  assert "step 6/6" in resumed
  assert list((work / "model" / "train").iterdir()), "no TensorBoard summaries written"


@pytest.mark.slow
def test_the_jax_route_with_requirements_gcs_trains_on_gs_without_tensorflow(jax_route):
  """requirements/gcs.txt (gcsfs, no TensorFlow) is all the JAX route needs for a gs://
  model_dir: a run on a storage emulator writes its checkpoints and params.yaml to the
  bucket and evaluates them from there with only the evaluation's settings."""
  import gcs_emulator  # pylint: disable=import-outside-toplevel
  if not gcs_emulator.available():
    pytest.skip("needs gcp-storage-emulator and gcsfs (extra test)")
  bin_dir, env, work = jax_route
  before = set(os.listdir(work))
  with gcs_emulator.running() as host:
    run_env = dict(env, **gcs_emulator.environment(host))
    model_dir = f"gs://{gcs_emulator.BUCKET}/run"
    output = _run([bin_dir / "bert-tf-train", "--backend=jax",
                   "--experiment=pretraining_bert_tiny", f"--model_dir={model_dir}",
                   f"--params_override={_jax_pretraining_overrides(2, format='dummy')}"],
                  cwd=work, env=run_env)
    assert "step 2/2" in output
    evaluated = _run([bin_dir / "bert-tf-train", "--mode=eval", f"--model_dir={model_dir}",
                      "--params_override=eval_data.format=dummy,eval_data.global_batch_size=4,"
                      "eval_data.seq_length=32,eval_data.max_predictions_per_seq=5"],
                     cwd=work, env=run_env)
    assert "Done (eval)" in evaluated
    import gcsfs  # pylint: disable=import-outside-toplevel
    previous = {key: os.environ.get(key) for key in gcs_emulator.environment(host)}
    os.environ.update(gcs_emulator.environment(host))
    try:
      written = {os.path.basename(name) for name in
                 gcsfs.GCSFileSystem(skip_instance_cache=True).ls(model_dir)}
    finally:
      for key, value in previous.items():
        if value is None:
          os.environ.pop(key, None)
        else:
          os.environ[key] = value
  assert {"ckpt-2.h5", "params.yaml"} <= written, written
  assert set(os.listdir(work)) == before  # nothing local, no gs:/ folder


def _tool_flags(module: str):
  """The flags tools/<module>.py defines, by name."""
  source = (TOOLS / f"{module}.py").read_text(encoding="utf-8")
  return re.findall(r'DEFINE_\w+\(\s*"(\w+)"', source)


@pytest.mark.slow
def test_every_command_refuses_in_one_line_without_tensorflow_and_writes_nothing(jax_route):
  """Each installed command, where TensorFlow is absent: --help describes its flags, and a
  run that needs TensorFlow (or, for the converter, safetensors) is one line saying so,
  before anything is written."""
  bin_dir, env, work = jax_route
  outputs = work / "outputs"
  outputs.mkdir()
  out = lambda name: outputs / "out" / name
  runs = {
      "bert-tf-train": ["--experiment=pretraining_bert_tiny", f"--model_dir={out('model')}"],
      "bert-tf-create-pretraining-data": ["--input_file=corpus.txt", "--vocab_file=vocab.txt",
                                          f"--output={out('pretrain')}"],
      "bert-tf-create-finetuning-data": ["--experiment=glue_sst2",
                                         f"--output={out('sst2.tfrecord')}"],
      "bert-tf-build-vocab": ["--input=corpus.txt", f"--output={out('vocab.txt')}"],
      "bert-tf-convert-checkpoint": ["--input=ckpt", f"--output_dir={out('converted')}",
                                     "--output_format=huggingface"],
      "bert-tf-export": ["--checkpoint=ckpt", f"--export_dir={out('export')}"],
      "bert-tf-make-serving-request": ["--text=hello", f"--output={out('request.json')}"],
      "bert-tf-query": [str(out("export")), "a text"],
      "bert-tf-extract-features": ["--input_file=in.txt", f"--output_file={out('f.jsonl')}",
                                   "--vocab_file=vocab.txt", "--encoder_size=tiny"],
  }
  assert set(runs) == set(console_scripts())
  for command, module in console_scripts().items():
    shown = subprocess.run([bin_dir / command, "--help"], cwd=outputs, env=env,
                           capture_output=True, text=True, check=False)
    assert "Traceback" not in shown.stderr, shown.stderr[-3000:]
    for name in _tool_flags(module) + ["verbose"]:
      assert re.search(rf"--(\[no\])?{name}:", shown.stdout), (command, name, shown.stdout)
    refused = subprocess.run([bin_dir / command, *runs[command]], cwd=outputs, env=env,
                             capture_output=True, text=True, check=False)
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 1 and len(lines) == 1, (command, refused.stderr[-3000:])
    assert lines[0].startswith(f"{command}: error: "), lines
    if command == "bert-tf-convert-checkpoint":
      # Conversion needs no TensorFlow (save for google_tf1); Hugging Face's files need
      # safetensors, which the JAX route's requirements leave out.
      assert lines[0].endswith("needs safetensors: pip install safetensors"), lines
    else:
      assert "needs TensorFlow" in lines[0], lines
      assert "pip install . in its source checkout" in lines[0], lines
    assert os.listdir(outputs) == [], (command, os.listdir(outputs))
