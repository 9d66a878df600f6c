"""How long resuming from a checkpoint on Cloud Storage takes, against downloading the
file whole, and how many requests each makes: on a GCS emulator on 127.0.0.1.

  python -m bench.remote_restore --backend=tensorflow [--sizes=base --repeats=3]
  python -m bench.remote_restore --backend=jax

For each encoder size it builds the Trainer of pretraining_bert_<size> (dummy input,
AdamW), saves its checkpoint (weights, AdamW moments, step) into the emulator's bucket,
then takes turns:
`download` copies the file to a local one in one request stream (gcsfs's `get`, the
floor of what a read of every byte costs); `fetch` copies it as a restore does
(bert_tf.utils.range_reads.fetch: 8 MiB ranges, 8 at a time); `restore` is what a
resume does (the fetch, then the local work), the
CheckpointSaver's `latest` (which checks that the newest checkpoint reads in full) and
`restore` (the items, the optimizer state and the step) through the package's file
layer. Each phase's requests are counted in the emulator's log; the listing caches are
emptied before each phase. The emulator is the tests' one (tests/gcs_emulator.py, in
memory; gcp-storage-emulator and gcsfs, the extras test and gcs); gcsfs serves gs://
there on both engines (--backend=jax makes TensorFlow unimportable, as on a JAX host;
with TensorFlow the package reaches an emulator through gcsfs too, tf.io.gfile's client
having no emulator setting). BERT-large's state is about 4 GB, held by the Trainer, its
save's host copy and the emulator's memory at once.
"""

import os
import sys
import tempfile
import time
from typing import Dict, List, Sequence

from absl import app
from absl import flags

from bench import common
from bench import stats

flags.DEFINE_list("sizes", ["base"], "Encoder sizes (configs: base, large, ...).")
flags.DEFINE_integer("repeats", 3, "Turns of download and restore per size.")
flags.DEFINE_enum("backend", "tensorflow", ["tensorflow", "jax"], "The Keras backend.")
FLAGS = flags.FLAGS

PHASES = ("download", "fetch", "restore")


def request_counts(requests: Sequence[tuple]) -> Dict[str, int]:
  """{"total", "ranged": object reads (`/download/...` GETs), "metadata": the rest} of
  the (method, path) pairs the emulator logged (gcs_emulator.requests)."""
  ranged = sum(1 for method, path in requests
               if method == "GET" and path.startswith("/download/"))
  return {"total": len(requests), "ranged": ranged, "metadata": len(requests) - ranged}


def summarize(times: Dict[str, List[float]], counts: Dict[str, List[Dict[str, int]]],
              size_bytes: int) -> dict:
  """The medians of each phase's seconds and request counts, the fetch's and the
  restore's time over the download's, and the bound on the restore's requests (one per
  8 MiB plus 16)."""
  row = {"size_mb": size_bytes / 2**20,
         "bound": -(-size_bytes // (8 << 20)) + 16}
  for phase in PHASES:
    row[f"{phase}_s"] = stats.median(times[phase])
    row[f"{phase}_requests"] = int(stats.median([c["total"] for c in counts[phase]]))
  row["ratio"] = row["restore_s"] / row["download_s"]
  row["fetch_ratio"] = row["fetch_s"] / row["download_s"]
  return row


def table(rows: Dict[str, dict]) -> str:
  """A markdown table of summarize's rows, keyed `engine/size`."""
  header = ["model", "engine", "checkpoint MB", "download s", "download requests",
            "fetch s", "restore s", "restore requests", "bound", "fetch / download",
            "restore / download"]
  cells = []
  for key, row in sorted(rows.items()):
    engine, size = key.split("/")
    cells.append([f"BERT-{size}", engine, f"{row['size_mb']:.0f}",
                  f"{row['download_s']:.2f}", row["download_requests"],
                  f"{row['fetch_s']:.2f}", f"{row['restore_s']:.2f}",
                  row["restore_requests"], row["bound"], f"{row['fetch_ratio']:.2f}x",
                  f"{row['ratio']:.2f}x"])
  return common.markdown_table(header, cells)


def _trainer(size: str, model_dir: str):
  """The Trainer of the official pretraining experiment of `size` on dummy batches of 8."""
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  from bert_tf.training.trainer import Trainer  # pylint: disable=g-import-not-at-top
  experiment = experiments.resolve_experiment(
      f"pretraining_bert_{size}", params_override=",".join(
          f"{section}.{key}" for section in ("train_data", "eval_data")
          for key in ("format=dummy", "global_batch_size=8")))
  return Trainer(experiment, model_dir, log_fn=lambda _: None)


def _measure(size: str, bucket: str, log_path: str, gcs_emulator, fs) -> dict:
  """Saves BERT-`size`'s trainer checkpoint into the bucket and times --repeats turns of
  download and restore; returns summarize's row."""
  from bert_tf.training import checkpointing  # pylint: disable=g-import-not-at-top
  from bert_tf.utils import range_reads  # pylint: disable=g-import-not-at-top
  model_dir = f"{bucket}/{size}"
  trainer = _trainer(size, model_dir)
  saver = checkpointing.CheckpointSaver(model_dir, 1, trainer.engine, background=False)
  trainer.engine.step = 1
  path = saver.save()
  size_bytes = fs.size(path)
  times = {phase: [] for phase in PHASES}
  counts = {phase: [] for phase in PHASES}
  with tempfile.TemporaryDirectory() as local:
    for turn in range(FLAGS.repeats):
      for phase in stats.round_order(PHASES, turn):
        fs.invalidate_cache()
        _, mark = gcs_emulator.requests(log_path)
        start = time.perf_counter()
        if phase == "download":
          fs.get(path, os.path.join(local, "ckpt.h5"))
        elif phase == "fetch":
          range_reads.fetch(path, os.path.join(local, "ckpt.h5"))
        else:
          assert saver.restore(saver.latest()) == 1
        times[phase].append(time.perf_counter() - start)
        range_reads.release_local_copy()
        counts[phase].append(request_counts(gcs_emulator.requests(log_path, mark)[0]))
        print(f"BERT-{size} {phase}: {times[phase][-1]:.2f} s, {counts[phase][-1]}",
              flush=True)
  fs.rm(model_dir, recursive=True)
  return summarize(times, counts, size_bytes)


def main(argv):
  del argv
  os.environ["KERAS_BACKEND"] = FLAGS.backend
  if FLAGS.backend == "jax":
    sys.modules["tensorflow"] = None  # remote paths through fsspec, as on a JAX host
  sys.path.insert(0, os.path.join(common.REPO_ROOT, "tests"))
  import gcs_emulator  # pylint: disable=g-import-not-at-top
  if not gcs_emulator.available():
    raise app.UsageError("needs gcp-storage-emulator and gcsfs (extras test and gcs)")
  rows = {}
  with tempfile.TemporaryDirectory() as directory:
    log_path = os.path.join(directory, "emulator.log")
    with gcs_emulator.running(log_path=log_path) as host:
      os.environ.update(gcs_emulator.environment(host))
      import gcsfs  # pylint: disable=g-import-not-at-top
      fs = gcsfs.GCSFileSystem()
      for size in FLAGS.sizes:
        rows[f"{FLAGS.backend}/{size}"] = _measure(
            size, f"gs://{gcs_emulator.BUCKET}", log_path, gcs_emulator, fs)
  print(f"{common.command_line()} on {common.machine_description()}, load average "
        f"{common.load_average()}:\n{table(rows)}")


if __name__ == "__main__":
  app.run(main)
