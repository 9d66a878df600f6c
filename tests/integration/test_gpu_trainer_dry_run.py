"""`bash bench/gpu.sh trainer` end to end on the CPU at tiny size, as a GPU session runs it:
the records made with TensorFlow (STAGE=prepare), the device stage with every import
of TensorFlow failing (the trainer's processes included) (DRY_RUN=1: the kernels against their XLA forms, the trainer
killed and resumed bit-exactly, the numerics steps against the CPU reference, the
export model's checkpoint and outputs), then its SavedModel answering as the model
did (STAGE=compare)."""

import json
import os
import subprocess
import sys

import bench_helpers
import paths

SCRIPT = os.path.join(paths.ROOT, "bench", "gpu.sh")
# (file, function) of every place that may ask for TensorFlow in a run without it: the
# probes that go on without it, and the machine facts that say it is absent.
TENSORFLOW_PROBES = {
    ("bert_tf/utils/file_systems.py", "_tensorflow_gfile"),
    ("bert_tf/training/jax_engine/devices.py", "keep_tensorflow_off_accelerators"),
    ("keras/src/utils/module_utils.py", "initialize"),  # keras.utils.set_random_seed
    ("tensorboard/compat/__init__.py", "tf"),
    ("<string>", "<module>"),  # bench/gpu.sh: python -c "import tensorflow"
}


def _script(env, *flags):
  return subprocess.run(["bash", SCRIPT, "trainer", *flags], cwd=paths.ROOT, env=env,
                        capture_output=True, text=True, timeout=1800, check=False)


def test_dry_run_trains_resumes_checks_and_exports_without_tensorflow(tmp_path):
  data, out = tmp_path / "data", tmp_path / "out"
  base = dict(os.environ, PYTHON=sys.executable, DATA=str(data), OMP_NUM_THREADS="1")
  base.pop("XLA_FLAGS", None)
  prepared = _script(dict(base, STAGE="prepare", PYTHONPATH=paths.ROOT), "--dupe_factor=2")
  assert prepared.returncode == 0, prepared.stderr[-3000:]

  (tmp_path / "sitecustomize.py").write_text(bench_helpers.NO_TENSORFLOW_SITECUSTOMIZE)
  import_log = tmp_path / "tensorflow_imports.txt"
  # The budget is a GPU lease's; on a loaded CPU the tiny phases take longer than
  # their GPU estimates, and a phase skipped for time would prove nothing here.
  device = _script(dict(base, OUT=str(out), DRY_RUN="1", WHEELS=str(tmp_path / "none"),
                        BUDGET="1500",
                        TF_IMPORT_LOG=str(import_log),
                        PYTHONPATH=os.pathsep.join([str(tmp_path), paths.ROOT])),
                   "--phases=kernels,train,steps,export", "--numerics_steps=4",
                   f"--work_dir={tmp_path / 'work'}")
  assert device.returncode == 0, device.stdout[-3000:] + device.stderr[-3000:]
  phases = {r["phase"]: r for r in map(json.loads, (out / "trainer.jsonl").read_text(
  ).splitlines())}
  assert list(phases) == ["kernels", "train", "steps", "export"]
  assert all(r["status"] == "ok" for r in phases.values()), phases
  # TensorFlow was asked for, and not found, only where a run does without it.
  importers = bench_helpers.tensorflow_importers(import_log.read_text())
  assert importers <= TENSORFLOW_PROBES, importers - TENSORFLOW_PROBES
  assert phases["kernels"]["auto_attention"]["when_it_disagrees"]["kernel_works"] is False
  train = phases["train"]
  assert train["resumed"].endswith("ckpt-10.h5 at step 10")
  assert train["steps"] == [15, 20]
  # One CPU thread: the resumed run is the uninterrupted one, bit for bit.
  assert train["losses_bit_equal"] and train["arrays_equal"]
  steps = phases["steps"]["runs"]
  assert len(steps["cpu_float32_reference"]["losses"]) == 4
  assert {"machine.txt", "trainer.txt", "logs.txt", "gpu_outputs.npz", "ckpt-20.h5",
          "params.yaml"} <= set(os.listdir(out))

  compared = _script(dict(base, STAGE="compare", RESULTS=str(out), PYTHONPATH=paths.ROOT),
                     f"--work_dir={tmp_path / 'compare'}")
  assert compared.returncode == 0, compared.stdout[-3000:] + compared.stderr[-3000:]
  answer = json.loads(compared.stdout.strip().splitlines()[-1])
  assert answer["ok"] and max(answer["max_relative_error"].values()) < 1e-5
