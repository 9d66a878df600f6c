"""Sets up a virtual environment for bert_tf, then runs the quickstart or the tests.

  python3 tools/setup_and_run.py quickstart   # the main job on embedded data
  python3 tools/setup_and_run.py test         # the default test suite
  python3 tools/setup_and_run.py test -m slow # extra arguments go to pytest
  (tests run in one pytest-xdist worker per core, at most 4, a test file to a worker,
  unless -n is given)

Needs nothing but Python 3.10+: the environment is created in .venv/ and reinstalled
only when setup.py or requirements/ changes or a command needs more extras than are
installed (the tests also install `tfds`, TensorFlow Datasets, which the quickstart does
without).
"""

import hashlib
import os
import pathlib
import subprocess
import sys
import venv

ROOT = pathlib.Path(__file__).resolve().parent.parent
VENV = pathlib.Path(os.environ.get("BERT_TF_VENV", ROOT / ".venv"))
STAMP = VENV / ".bert_tf_installed"
# The extras each command installs with bert_tf.
EXTRAS = {"quickstart": ("test",), "test": ("test", "tfds", "jax", "torch")}


def _python() -> str:
  return str(VENV / ("Scripts" if os.name == "nt" else "bin") / "python")


def _requirements_digest() -> str:
  """A digest of setup.py and the requirement files it reads."""
  digest = hashlib.sha256()
  for path in [ROOT / "setup.py", *sorted((ROOT / "requirements").glob("*.txt"))]:
    digest.update(path.read_bytes())
  return digest.hexdigest()


def ensure_environment(extras) -> None:
  """Creates .venv and installs bert_tf (editable) with `extras`, if not done yet."""
  digest = _requirements_digest()
  # The stamp holds the requirements' digest, then the extras installed with it.
  stamp = STAMP.read_text().split() if STAMP.exists() else []
  installed = set(stamp[1:]) if stamp[:1] == [digest] else None
  if installed is not None and installed >= set(extras):
    return
  extras = sorted(set(extras) | (installed or set()))
  if not (VENV / "bin" / "python").exists():
    print(f"Creating virtual environment {VENV}", flush=True)
    venv.EnvBuilder(with_pip=True).create(VENV)
  print("Installing bert_tf and its dependencies (first run only)...", flush=True)
  for command in (["install", "-q", "--upgrade", "pip"],
                  ["install", "-q", "-e", f"{ROOT}[{','.join(extras)}]"]):
    if subprocess.call([_python(), "-m", "pip", *command]) != 0:
      # pip has said why above (often the network): one line, and a rerun resumes.
      raise SystemExit(f"setup_and_run: error: 'pip {' '.join(command)}' failed (its "
                       "message is above); run the same command again to retry")
  STAMP.write_text(" ".join([digest, *extras]))


def _parallel_workers(pytest_args) -> list:
  """pytest-xdist's `-n N` with one worker per core (at most 4: each worker holds its
  own TensorFlow), unless the arguments choose (`-n`, `--numprocesses`, `-p no:xdist`).
  A test file goes to one worker (`--dist loadfile`): its module fixtures, many of them
  a trained model or a run in a subprocess, are then built once, not once per worker."""
  if any(a.startswith(("-n", "--numprocesses", "--dist")) or a == "no:xdist"
         for a in pytest_args):
    return []
  return ["-n", str(max(1, min(os.cpu_count() or 1, 4))), "--dist", "loadfile"]


def main(argv) -> int:
  if len(argv) < 2 or argv[1] not in ("quickstart", "test"):
    print(__doc__)
    return 2
  ensure_environment(EXTRAS[argv[1]])
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
  if argv[1] == "quickstart":
    command = [_python(), str(ROOT / "tools" / "quickstart.py"), *argv[2:]]
  else:
    command = [_python(), "-m", "pytest", *_parallel_workers(argv[2:]), *argv[2:]]
  return subprocess.call(command, cwd=ROOT, env=env)


if __name__ == "__main__":
  sys.exit(main(sys.argv))
