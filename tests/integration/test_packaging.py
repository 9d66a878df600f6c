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


def _wheel_and_fresh_venv(tmp: pathlib.Path):
  """Builds the wheel under tmp and creates an empty virtual environment there.

  Returns:
    (wheel path, the venv's python, its bin folder, an environment whose PATH finds its
    commands first, an empty working folder outside the checkout).
  """
  source, dist, venv, work = (tmp / name for name in ("source", "dist", "venv", "work"))
  for folder in (source, dist, work):
    folder.mkdir()
  wheel = _build_wheel(source, dist)
  env = _clean_env()
  _run([sys.executable, "-m", "venv", str(venv)], cwd=work, env=env)
  bin_dir = venv / "bin"
  env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
  return wheel, bin_dir / "python", bin_dir, env, work


@pytest.mark.slow
def test_the_wheel_installs_configs_and_commands_into_a_fresh_environment():
  with tempfile.TemporaryDirectory(prefix="bert_tf_wheel_") as tmp:
    wheel, python, bin_dir, env, work = _wheel_and_fresh_venv(pathlib.Path(tmp))
    source = pathlib.Path(tmp) / "source"

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


@pytest.mark.slow
def test_the_jax_route_trains_checkpoints_and_resumes_without_tensorflow():
  """The README's install for JAX alone: requirements/jax.txt, then the wheel with
  --no-deps. TensorFlow is absent; bert-tf-train --backend=jax reads the tools' TFRecords
  (written here, with TensorFlow), checkpoints, and a longer rerun resumes."""
  import pretraining_fixtures  # pylint: disable=import-outside-toplevel
  with tempfile.TemporaryDirectory(prefix="bert_tf_jax_route_") as tmp:
    wheel, python, bin_dir, env, work = _wheel_and_fresh_venv(pathlib.Path(tmp))
    _run([python, "-m", "pip", "install", "-q", "-r", ROOT / "requirements" / "jax.txt"],
         cwd=work, env=env)
    _run([python, "-m", "pip", "install", "-q", "--no-deps", str(wheel)], cwd=work, env=env)
    absent = subprocess.run([python, "-c", "import tensorflow"], cwd=work, env=env,
                            capture_output=True, text=True, check=False)
    assert absent.returncode != 0 and "No module named 'tensorflow'" in absent.stderr

    records = work / "pretrain.tfrecord"
    pretraining_fixtures.write_record_file(str(records), num_documents=40)

    def train(steps):
      overrides = ",".join([
          f"train_data.input_path={records}", "train_data.global_batch_size=4",
          "train_data.seq_length=32", "train_data.max_predictions_per_seq=5",
          f"trainer.train_steps={steps}", "trainer.steps_per_loop=2",
          "trainer.checkpoint_interval=2", "model.encoder.vocab_size=100"])
      return _run([bin_dir / "bert-tf-train", "--backend=jax",
                   "--experiment=pretraining_bert_tiny", f"--model_dir={work / 'model'}",
                   f"--params_override={overrides}"], cwd=work, env=env)
    assert "step 4/4" in train(4)
    assert (work / "model" / "ckpt-4.h5").is_file()
    resumed = train(6)
    assert f"Resumed from {work / 'model'}/ckpt-4.h5 at step 4" in resumed
    assert "step 6/6" in resumed
    assert list((work / "model" / "train").iterdir()), "no TensorBoard summaries written"
