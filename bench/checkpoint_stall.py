"""How long a checkpoint blocks the training step, written on the training thread
(trainer.async_checkpoints=false) or in the background (the default), to a local
model_dir and to a GCS emulator on 127.0.0.1.

  python -m bench.checkpoint_stall --backend=tensorflow --storage=local
  python -m bench.checkpoint_stall --backend=jax --storage=local,emulator
  (and --sizes=base,large --saves=3, the defaults)

For each encoder size it builds the pretraining Trainer (dummy input, AdamW) and times
`CheckpointSaver.save` as the Trainer calls it between loops: `blocked` is the time the
calling (training) thread spends in it, which the step waits for; `total` the time until
the checkpoint is committed (`wait` returns). The median of --saves saves each, every
save on its own (the previous one committed first), the two modes taking turns. The
first save maps new host memory for the copy; the later ones fill it again. Each
checkpoint is deleted once timed, so the disk holds at most the one being written
(BERT-large: about 12 GB on the emulator's disk and the local temporary file together).
The emulator is the tests' one (tests/gcs_emulator.py: gcp-storage-emulator storing on
disk in a temporary folder deleted at the end, gcsfs through STORAGE_EMULATOR_HOST; the
extras test and gcs), which only the JAX engine without TensorFlow reaches (tf.io.gfile's
gs:// client ignores STORAGE_EMULATOR_HOST): with --backend=jax, TensorFlow is made
unimportable. Each run merges its rows into the results file, keyed by backend, size and
storage. BERT-large's state with its AdamW moments is about 4 GB: the process holds it
twice while a save is written (the variables and their host copy), and the emulator
reads each upload whole into its memory once to commit it and once to copy it (a
rename).
"""

import os
import statistics
import sys
import tempfile
import time
from typing import Dict, List

from absl import app
from absl import flags

from bench import common

flags.DEFINE_list("sizes", ["base", "large"], "Encoder sizes (configs: base, large, ...).")
flags.DEFINE_list("storage", ["local", "emulator"], "Where model_dir is: local (a "
                  "temporary folder on the local disk) or emulator (a GCS emulator).")
flags.DEFINE_integer("saves", 3, "Saves timed per size, storage and mode.")
flags.DEFINE_enum("backend", "tensorflow", ["tensorflow", "jax"], "The Keras backend.")
flags.DEFINE_bool("write_readme", True, "Regenerate this benchmark's README section.")
FLAGS = flags.FLAGS

_SECTION = "checkpoint_stall"
MODES = ("sync", "async")


def _trainer(size: str, model_dir: str):
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  from bert_tf.training.trainer import Trainer  # pylint: disable=g-import-not-at-top
  data = dict(format="dummy", global_batch_size=8, seq_length=128,
              max_predictions_per_seq=20)
  experiment = experiments.experiment_from_dict(dict(
      task=dict(name="pretraining"), model=dict(encoder=dict(size=size)),
      train_data=data, eval_data=dict(data, is_training=False),
      optimizer=dict(type="adamw"), trainer=dict(max_to_keep=1)))
  return Trainer(experiment, model_dir, log_fn=lambda _: None)


def _time_saves(trainer, model_dirs: Dict[str, str]) -> Dict[str, Dict[str, List[float]]]:
  """{mode: {"blocked": [s per save], "total": [s per save]}} of --saves saves per mode
  into model_dirs[mode], the modes taking turns (the load of a shared machine moves) on
  one CheckpointSaver (whose host copy each save fills again)."""
  from bert_tf.training import checkpointing  # pylint: disable=g-import-not-at-top
  from bert_tf.utils import files  # pylint: disable=g-import-not-at-top
  saver = checkpointing.CheckpointSaver("", 1, trainer.engine)
  times = {mode: {"blocked": [], "total": []} for mode in model_dirs}
  for i in range(FLAGS.saves):
    for mode, model_dir in model_dirs.items():
      saver.model_dir, saver.background = model_dir, mode == "async"
      trainer.engine.step = i + 1
      start = time.perf_counter()
      path = saver.save()
      blocked = time.perf_counter() - start
      saver.wait()
      times[mode]["blocked"].append(blocked)
      times[mode]["total"].append(time.perf_counter() - start)
      files.remove(path)
  return times


def _state_bytes(trainer) -> int:
  from bert_tf.checkpoints import portable  # pylint: disable=g-import-not-at-top
  engine = trainer.engine
  variables = [v for item in engine.model.trained_items.values()
               for v in portable.item_variables(item).values()]
  variables += list(engine.checkpoint_state().values())
  return sum(int(portable.host_value(v).nbytes) for v in {id(v): v for v in variables}.values())


def _start_emulator(stack, directory: str) -> str:
  """Starts the tests' GCS emulator (until `stack` closes), storing its objects under
  `directory`, and points gcsfs at it; returns its bucket's URL."""
  sys.path.insert(0, os.path.join(common.REPO_ROOT, "tests"))
  import gcs_emulator  # pylint: disable=g-import-not-at-top
  if not gcs_emulator.available():
    raise app.UsageError("--storage=emulator needs gcp-storage-emulator and gcsfs "
                         "(extras test and gcs)")
  host = stack.enter_context(gcs_emulator.running(directory=directory))
  os.environ.update(gcs_emulator.environment(host))
  return f"gs://{gcs_emulator.BUCKET}"


def _report(payload: dict) -> str:
  rows, notes = [], []
  for key, entry in sorted(payload["results"].items()):
    backend, size, storage = key.split("/")
    cells = [f"BERT-{size}", f"{entry['state_gb']:.2f}", backend, storage]
    for mode in MODES:
      if mode in entry:
        cells += [f"{entry[mode]['blocked_s']:.2f}", f"{entry[mode]['total_s']:.2f}"]
      else:
        cells += ["-", "-"]
    rows.append(cells)
    notes.append(f"{key}: `{entry['command']}`, load average before {entry['load_before']}, "
                 f"after {entry['load_after']}" + (f"; {entry['note']}" if "note" in entry
                                                   else ""))
  header = ["model", "state GB", "engine", "model_dir", "sync: step blocked s",
            "sync: total s", "async: step blocked s", "async: total s"]
  machines = sorted({entry["machine"] for entry in payload["results"].values()})
  return "\n".join([
      f"On {'; '.join(machines)}:", "", common.markdown_table(header, rows), "",
      "- Medians of the saves of each run, sync and async taking turns (the first save "
      "maps new host memory for its copy, the later ones fill it again). `step blocked`: the training thread "
      "inside the save (sync: the whole write; async: the copy of the arrays to host "
      "memory and the input position); `total`: until the checkpoint is committed.",
      "- The state: weights, AdamW moments and step, float32. Rows measured since "
      "2026-11-27: the emulator stores on disk (tests/gcs_emulator.py) and each "
      "checkpoint is deleted once timed.",
      "- The load averages below are those of a shared machine: other processes kept it "
      "busy, so the absolute times move several-fold between runs; sync and async of one "
      "row shared the same moments."] + [f"- {note}" for note in notes])


def main(argv):
  del argv
  os.environ["KERAS_BACKEND"] = FLAGS.backend
  if FLAGS.backend == "jax":
    sys.modules["tensorflow"] = None  # remote paths through fsspec, as on a JAX host
  elif "emulator" in FLAGS.storage:
    raise app.UsageError("--storage=emulator needs --backend=jax (tf.io.gfile's gs:// "
                         "client does not reach the emulator)")
  if FLAGS.write_readme:
    common.require_readme_section(_SECTION)
  import contextlib  # pylint: disable=g-import-not-at-top
  import keras  # pylint: disable=g-import-not-at-top
  load_before = common.load_average()
  results = {}
  with tempfile.TemporaryDirectory() as directory, contextlib.ExitStack() as stack:
    roots = {"local": directory}
    if "emulator" in FLAGS.storage:
      emulator_dir = os.path.join(directory, "emulator")
      os.makedirs(emulator_dir)
      roots["emulator"] = _start_emulator(stack, emulator_dir)
    for size in FLAGS.sizes:
      keras.backend.clear_session()
      trainer = _trainer(size, os.path.join(directory, "unused"))
      state_gb = _state_bytes(trainer) / 1e9
      for storage in FLAGS.storage:
        entry = results.setdefault(f"{FLAGS.backend}/{size}/{storage}", {
            "state_gb": state_gb, "command": common.command_line(),
            "machine": common.machine_description(), "saves": FLAGS.saves,
            "load_before": load_before})
        if storage == "emulator":
          entry["note"] = (f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, the "
                           "emulator on disk")
        times = _time_saves(trainer, {mode: f"{roots[storage]}/{size}-{storage}-{mode}"
                                      for mode in MODES})
        for mode in MODES:
          entry[mode] = {"blocked_s": statistics.median(times[mode]["blocked"]),
                         "total_s": statistics.median(times[mode]["total"]),
                         "runs": times[mode]}
          print(f"BERT-{size} {storage} {mode}: step blocked "
                f"{entry[mode]['blocked_s']:.2f} s, total {entry[mode]['total_s']:.2f} s "
                f"({state_gb:.2f} GB)", flush=True)
        entry["load_after"] = common.load_average()
      del trainer
  common.merge_results(_SECTION, "results", results)
  report = _report(common.read_results(_SECTION))
  print(report)
  if FLAGS.write_readme:
    common.update_readme_section(_SECTION, report)


if __name__ == "__main__":
  app.run(main)
