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
emptied before each phase. Start the emulator first (gcp-storage-emulator and gcsfs, the
extras test and gcs), its log into a file:

  gcp-storage-emulator start --host=127.0.0.1 --port=9023 --in-memory \
    --default-bucket=bench > emulator.log 2>&1 &
  python -m bench.remote_restore --emulator_host=http://127.0.0.1:9023 \
    --emulator_log=emulator.log --backend=jax

gcsfs serves gs://
there on both engines (--backend=jax makes TensorFlow unimportable, as on a JAX host;
with TensorFlow the package reaches an emulator through gcsfs too, tf.io.gfile's client
having no emulator setting). BERT-large's state is about 4 GB, held by the Trainer, its
save's host copy and the emulator's memory at once.
"""

import os
import re
import sys
import tempfile
import time
from typing import Dict, List, Sequence, Tuple

from absl import app
from absl import flags

from bench import common
from bench import stats

FLAGS = flags.FLAGS

PHASES = ("download", "fetch", "restore")


def logged_requests(log_path: str, start: int = 0) -> Tuple[List[tuple], int]:
  """The requests the emulator logged to `log_path` from byte `start` on, and the byte
  where its log ends: ([(method, path), ...], end)."""
  with open(log_path, "rb") as f:
    f.seek(start)
    text = f.read()
  found = re.findall(r'"(GET|POST|PUT|PATCH|DELETE|HEAD) (\S+) HTTP/[0-9.]+"',
                     text.decode(errors="replace"))
  return found, start + len(text)


def request_counts(requests: Sequence[tuple]) -> Dict[str, int]:
  """{"total", "ranged": object reads (`/download/...` GETs), "metadata": the rest} of
  the (method, path) pairs the emulator logged (logged_requests)."""
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


def _measure(size: str, bucket: str, log_path: str, fs) -> dict:
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
        _, mark = logged_requests(log_path)
        start = time.perf_counter()
        if phase == "download":
          fs.get(path, os.path.join(local, "ckpt.h5"))
        elif phase == "fetch":
          range_reads.fetch(path, os.path.join(local, "ckpt.h5"))
        else:
          assert saver.restore(saver.latest()) == 1
        times[phase].append(time.perf_counter() - start)
        range_reads.release_local_copy()
        counts[phase].append(request_counts(logged_requests(log_path, mark)[0]))
        print(f"BERT-{size} {phase}: {times[phase][-1]:.2f} s, {counts[phase][-1]}",
              flush=True)
  fs.rm(model_dir, recursive=True)
  return summarize(times, counts, size_bytes)


def main(argv):
  del argv
  if not (FLAGS.emulator_host and FLAGS.emulator_log):
    raise app.UsageError("--emulator_host and --emulator_log: a running emulator and "
                         "the file it logs to (see this module's docstring)")
  os.environ["KERAS_BACKEND"] = FLAGS.backend
  if FLAGS.backend == "jax":
    sys.modules["tensorflow"] = None  # remote paths through fsspec, as on a JAX host
  # gcsfs to the emulator, without the bucket-type probe an emulator cannot answer.
  os.environ.update(STORAGE_EMULATOR_HOST=FLAGS.emulator_host,
                    GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT="false")
  import gcsfs  # pylint: disable=g-import-not-at-top
  fs = gcsfs.GCSFileSystem()
  rows = {}
  for size in FLAGS.sizes:
    rows[f"{FLAGS.backend}/{size}"] = _measure(
        size, f"gs://{FLAGS.bucket}", FLAGS.emulator_log, fs)
  print(f"{common.command_line()} on {common.machine_description()}, load average "
        f"{common.load_average()}:\n{table(rows)}")


if __name__ == "__main__":
  # Defined here, not on import: tests import this module's arithmetic beside the
  # tools, whose flags share absl's registry.
  flags.DEFINE_list("sizes", ["base"], "Encoder sizes (configs: base, large, ...).")
  flags.DEFINE_integer("repeats", 3, "Turns of download and restore per size.")
  flags.DEFINE_enum("backend", "tensorflow", ["tensorflow", "jax"], "The Keras backend.")
  flags.DEFINE_string("emulator_host", os.environ.get("STORAGE_EMULATOR_HOST", ""),
                      "The running Cloud Storage emulator's address (http://HOST:PORT).")
  flags.DEFINE_string("emulator_log", "", "The file the emulator logs its requests to.")
  flags.DEFINE_string("bucket", "bench", "A bucket the emulator holds.")
  app.run(main)
