"""What writing and reading a pretraining_bert_<size> Trainer's checkpoint costs (dummy
input, AdamW; BERT-base 1.3 GB), the modes taking turns (stats.round_order).

  python -m bench.checkpoint_io --measure=checksums --sizes=base --turns=8

`checksums`: portable.write and read, or (--level=trainer) CheckpointSaver's save and
restore, with CRC32C checksums and without (none computed, written or read): medians,
ratios with 95% intervals over the turns, every CRC32C alone. --directory=/dev/shm keeps
the disk out; --cold drops the page cache before each restore (Linux, root).

  gcp-storage-emulator start --host=127.0.0.1 --port=9023 --in-memory \
    --default-bucket=bench > emulator.log 2>&1 &
  python -m bench.checkpoint_io --measure=remote --emulator_host=http://127.0.0.1:9023 \
    --emulator_log=emulator.log --backend=jax

`remote` (extras test, gcs): a resume (CheckpointSaver's `latest`, which verifies it, and
`restore`) from the emulator against `download` (gcsfs's `get`, one stream: the floor)
and `fetch` (range_reads.fetch), with the requests logged. --backend=jax: no TensorFlow.
"""

import os
import re
import sys
import tempfile
import time
from typing import Callable, Dict, List, Tuple
from unittest import mock

from absl import app
from absl import flags

from bench import common
from bench import stats
from bert_tf.checkpoints import array_io
from bert_tf.checkpoints import checksums
from bert_tf.checkpoints import portable
from bert_tf.checkpoints import snapshots

FLAGS = flags.FLAGS
MODES = ("with checksums", "without")
PHASES = ("download", "fetch", "restore")


def bert_saver(size: str, model_dir: str):
  """A synchronous CheckpointSaver of pretraining_bert_`size`'s Trainer (dummy input, step 1)."""
  from bert_tf.training import checkpointing  # pylint: disable=g-import-not-at-top
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  from bert_tf.training.trainer import Trainer  # pylint: disable=g-import-not-at-top
  experiment = experiments.resolve_experiment(f"pretraining_bert_{size}", params_override=(
      ",".join(f"{d}_data.{k}" for d in ("train", "eval")
               for k in ("format=dummy", "global_batch_size=8"))))
  engine = Trainer(experiment, model_dir, log_fn=lambda _: None).engine
  engine.step = 1
  return checkpointing.CheckpointSaver(model_dir, 1, engine, background=False)


def drop_page_cache() -> None:
  """Writes the dirty pages out and drops the page cache (Linux, as root)."""
  os.sync()
  with open("/proc/sys/vm/drop_caches", "w", encoding="ascii") as f:
    f.write("3\n")


def measure_checksums(save: Callable[[], str], restore: Callable[[str], object],
                      turns: int, cold: bool = False) -> Dict[str, Dict[str, List[float]]]:
  """{mode: {"save": [s], "restore": [s]}} of `save()` (the file it writes is removed
  after each turn) and `restore(file)` (`cold`: from the disk), in turns."""
  times = {mode: {"save": [], "restore": []} for mode in MODES}
  for turn in range(turns):
    for mode in stats.round_order(MODES, turn):
      with mock.patch.object(array_io, "CHECKSUMS", mode != "without"):
        start = time.perf_counter()
        path = save()
        times[mode]["save"].append(time.perf_counter() - start)
        if cold:
          drop_page_cache()
        start = time.perf_counter()
        restore(path)
        times[mode]["restore"].append(time.perf_counter() - start)
      os.remove(path)
  return times


def save_and_restore(level: str, saver, content: snapshots.Snapshot):
  """(save, restore) at `level` (--level): `saver`'s, or portable's of `content`."""
  if level == "trainer":
    return saver.save, saver.restore
  path = portable.path_for_step(saver.model_dir, 1)
  return lambda: portable.write(path, content), portable.read


def checksums_report(times: Dict[str, Dict[str, List[float]]], content: snapshots.Snapshot,
                     title: str) -> str:
  """The medians of each mode, their ratio (bootstrap interval) and every CRC32C alone."""
  start = time.perf_counter()
  for array in content.arrays.values():
    checksums.crc32c(array)
  gigabytes = sum(a.nbytes for a in content.arrays.values()) / 1e9
  lines = [f"{title}, {gigabytes:.2f} GB; medians of {len(times[MODES[0]]['save'])} turns "
           f"each; the CRC32C of every array alone: {time.perf_counter() - start:.2f} s"]
  for what in ("save", "restore"):
    with_, without = [stats.median(times[mode][what]) for mode in MODES]
    low, high = stats.bootstrap_ratio_interval(*[[[t] for t in times[mode][what]]
                                                 for mode in reversed(MODES)])
    lines.append(f"  {what}: {with_:.2f} s with checksums, {without:.2f} s without ("
                 f"{100 * (with_ / without - 1):+.1f}%; 95% interval {100 * (low - 1):+.1f}% "
                 f"to {100 * (high - 1):+.1f}%)")
  return "\n".join(lines)


def logged_requests(log_path: str, start: int = 0) -> Tuple[List[tuple], int]:
  """([(method, path)] the emulator logged to `log_path` from byte `start` on, its end)."""
  with open(log_path, "rb") as f:
    text = f.read()[start:]
  found = re.findall(r'"(GET|POST|PUT|PATCH|DELETE|HEAD) (\S+) HTTP/[0-9.]+"',
                     text.decode(errors="replace"))
  return found, start + len(text)


def summarize(times: Dict[str, List[float]], counts: Dict[str, List[int]],
              size_bytes: int) -> dict:
  """The medians of each phase's seconds and requests, fetch and restore over download,
  and the bound on the restore's requests (one per 8 MiB plus 16)."""
  row = {"size_mb": size_bytes / 2**20, "bound": -(-size_bytes // (8 << 20)) + 16}
  for phase in PHASES:
    row[f"{phase}_s"] = stats.median(times[phase])
    row[f"{phase}_requests"] = int(stats.median(counts[phase]))
  return dict(row, ratio=row["restore_s"] / row["download_s"],
              fetch_ratio=row["fetch_s"] / row["download_s"])


def table(rows: Dict[str, dict]) -> str:
  """A markdown table of summarize's rows, keyed `engine/size`."""
  header = ["model", "engine", "checkpoint MB", "download s", "download requests", "fetch s",
            "restore s", "restore requests", "bound", "fetch / download", "restore / download"]
  cells = [[f"BERT-{key.split('/')[1]}", key.split("/")[0], f"{row['size_mb']:.0f}",
            f"{row['download_s']:.2f}", row["download_requests"], f"{row['fetch_s']:.2f}",
            f"{row['restore_s']:.2f}", row["restore_requests"], row["bound"],
            f"{row['fetch_ratio']:.2f}x", f"{row['ratio']:.2f}x"]
           for key, row in sorted(rows.items())]
  return common.markdown_table(header, cells)


def measure_remote(size: str, bucket: str, log_path: str, fs) -> dict:
  """summarize's row of --turns turns of each phase on BERT-`size`'s checkpoint."""
  from bert_tf.utils import range_reads  # pylint: disable=g-import-not-at-top
  model_dir = f"{bucket}/{size}"
  saver = bert_saver(size, model_dir)
  path = saver.save()
  size_bytes = fs.size(path)
  times, counts = {phase: [] for phase in PHASES}, {phase: [] for phase in PHASES}
  with tempfile.TemporaryDirectory() as local:
    run = {"download": lambda: fs.get(path, os.path.join(local, "ckpt.h5")),
           "fetch": lambda: range_reads.fetch(path, os.path.join(local, "ckpt.h5")),
           "restore": lambda: saver.restore(saver.latest())}
    for turn in range(FLAGS.turns):
      for phase in stats.round_order(PHASES, turn):
        fs.invalidate_cache()
        _, mark = logged_requests(log_path)
        start = time.perf_counter()
        run[phase]()
        times[phase].append(time.perf_counter() - start)
        range_reads.release_local_copy()
        counts[phase].append(len(logged_requests(log_path, mark)[0]))
  fs.rm(model_dir, recursive=True)
  return summarize(times, counts, size_bytes)


def main(argv):
  del argv
  remote = FLAGS.measure == "remote"
  if remote and not (FLAGS.emulator_host and FLAGS.emulator_log):
    raise app.UsageError("--emulator_host and --emulator_log: a running emulator and the "
                         "file it logs to (see this module's docstring)")
  os.environ["KERAS_BACKEND"] = FLAGS.backend
  if FLAGS.backend == "jax":
    sys.modules["tensorflow"] = None  # remote paths through fsspec, as on a JAX host
  if not remote:
    for size in FLAGS.sizes:
      with tempfile.TemporaryDirectory(dir=FLAGS.directory) as directory:
        saver = bert_saver(size, directory)
        content = snapshots.snapshot(saver.engine.model.trained_items,
                                    saver.engine.checkpoint_state(), step=1,
                                    position={"batches_read": 8})
        times = measure_checksums(*save_and_restore(FLAGS.level, saver, content),
                                  FLAGS.turns, FLAGS.cold)
      print(checksums_report(times, content, f"BERT-{size} checkpoint, --level={FLAGS.level}"))
  else:
    # gcsfs to the emulator, without the bucket-type probe an emulator cannot answer.
    os.environ.update(STORAGE_EMULATOR_HOST=FLAGS.emulator_host,
                      GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT="false")
    import gcsfs  # pylint: disable=g-import-not-at-top
    fs = gcsfs.GCSFileSystem()
    print(table({f"{FLAGS.backend}/{size}": measure_remote(
        size, f"gs://{FLAGS.bucket}", FLAGS.emulator_log, fs) for size in FLAGS.sizes}))
  print(f"{common.command_line()} on {common.machine_description()}, load average "
        f"{common.load_average()}")


if __name__ == "__main__":
  # Not on import: tests import this module beside the tools (one flag registry).
  flags.DEFINE_enum("measure", "checksums", ["checksums", "remote"], "What to measure.")
  flags.DEFINE_list("sizes", ["base"], "Encoder sizes (configs.ENCODER_SIZES).")
  flags.DEFINE_integer("turns", 3, "Turns of each mode (checksums) or phase (remote).")
  flags.DEFINE_string("directory", None, "checksums: where to write (default: /tmp).")
  flags.DEFINE_bool("cold", False, "checksums: drop the page cache before each restore.")
  flags.DEFINE_enum("level", "file", ["file", "trainer"], "checksums: what saves, restores.")
  flags.DEFINE_enum("backend", "tensorflow", ["tensorflow", "jax"], "The Keras backend.")
  flags.DEFINE_string("emulator_host", "", "remote: the emulator (http://HOST:PORT).")
  flags.DEFINE_string("emulator_log", "", "remote: the file the emulator logs to.")
  flags.DEFINE_string("bucket", "bench", "remote: a bucket the emulator holds.")
  app.run(main)
