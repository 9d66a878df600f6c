"""What every benchmark shares: its paths and flags, the command and machine it names
beside its figures, and what it writes (bench/results/<name>.json and its table in
bench/results/<section>.md, joined into docs/benchmark-tables.md by bench/report.py).

The round protocol lives in driver.py, the peers' environments in peer_envs.py, the
statistics in stats.py, the measures of exported classifiers in export_measures.py.
"""

import functools
import json
import os
import re
import shlex
import sys
import time
from typing import Dict, Sequence

from absl import flags

from bench import matmul_peak
from bench import report
from bert_tf import constants
from bert_tf import cpu_kernels
from bert_tf.utils import files

# Before any TensorFlow import: our side runs with the CPU kernels the tools choose
# (TF_ENABLE_ONEDNN_OPTS=1 on x86-64). Peer workers get theirs from peer_envs.peer_env.
cpu_kernels.prefer_onednn()
cpu_kernels.leave_out_absent_gpus()

BENCH_DIR = report.BENCH_DIR
REPO_ROOT = report.REPO_ROOT
RESULTS_DIR = report.RESULTS_DIR
# Each run's folder (run_dir: its workers' stderr, TF logs and tracebacks, and the
# results of a run that does not record) goes here, outside the source tree.
LOG_DIR = os.environ.get("BERT_TF_BENCH_LOGS", "/tmp/bert_tf_bench_logs")
# The folder of the public data sets (glue_<task>/, conll2003/, squad_v1.1/,
# wikitext2_raw/, bert_vocab/): --data_dir, or this variable when the flag is not given.
DATA_DIR_VARIABLE = "BERT_TF_DATA"


def command_line() -> str:
  """The command that started this process (`python -m bench.<name> ...`, run from
  the repository root), to print beside its figures."""
  return " ".join(["python", "-m", program_name()] + [shlex.quote(a) for a in sys.argv[1:]])


def program_name() -> str:
  """The module the benchmark runs as (`bench.<name>`); where the process did not start
  as a module (a test calling a main), its program's path from the repository root."""
  spec = getattr(sys.modules["__main__"], "__spec__", None)
  if spec is not None and spec.name:
    return spec.name
  return os.path.relpath(sys.argv[0], REPO_ROOT)


def define_data_dir_flag() -> flags.FlagHolder:
  """Defines --data_dir, defaulting to $BERT_TF_DATA (see data_path)."""
  return flags.DEFINE_string(
      "data_dir", os.environ.get(DATA_DIR_VARIABLE),
      f"Folder of the public data sets (glue_<task>/, conll2003/, squad_v1.1/, "
      f"wikitext2_raw/, bert_vocab/); default ${DATA_DIR_VARIABLE}.")


def define_shape_flags(size: str = "base", batch_size: int = 32, seq_length: int = 128,
                       batch_help: str = "Sequences per step or call.") -> None:
  """Defines --size (a released encoder size), --batch_size and --seq_length: the shape
  of what a benchmark times, with these defaults."""
  flags.DEFINE_enum("size", size, list(constants.ENCODER_SIZES), "Encoder size.")
  flags.DEFINE_integer("batch_size", batch_size, batch_help)
  flags.DEFINE_integer("seq_length", seq_length, "Sequence length: the packed length, or "
                       "the longest where batches are padded to their longest example.")


def data_path(*parts: str) -> str:
  """A path under --data_dir; exits with a usage message when no folder was given."""
  data_dir = flags.FLAGS.data_dir
  if not data_dir:
    raise SystemExit(f"No data folder: pass --data_dir=DIR or set ${DATA_DIR_VARIABLE}.")
  return os.path.join(data_dir, *parts)


def load_average() -> str:
  """The 1/5/15-minute load averages, as `uptime` shows them."""
  return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def results_path(name: str) -> str:
  return os.path.join(RESULTS_DIR, f"{name}.json")


def records_run(values: flags.FlagValues = flags.FLAGS) -> bool:
  """Whether this run records its figures (bench/results/, docs/benchmark-tables.md): yes unless
  its --write_readme flag (in `values`), where it has one, is off (a check)."""
  return "write_readme" not in values or bool(values["write_readme"].value)


@functools.lru_cache(maxsize=None)
def run_dir() -> str:
  """This run's own folder under LOG_DIR, `<benchmark>-<UTC time>-<pid>`, made on first
  use: its workers' logs and, when it does not record (records_run), its results, so
  that runs started side by side write no file in common."""
  name = program_name().rsplit(".", 1)[-1].replace(os.sep, "_")
  path = os.path.join(LOG_DIR, f"{name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-"
                      f"{os.getpid()}")
  os.makedirs(path, exist_ok=True)
  return path


def _written_results_path(name: str) -> str:
  return results_path(name) if records_run() else os.path.join(run_dir(), f"{name}.json")


def _read_json(path: str) -> dict:
  if not os.path.exists(path):
    return {}
  with open(path) as f:
    return json.load(f)


def read_results(name: str) -> dict:
  """The results write_results writes (a check reads its own run's, not the recorded
  ones), or {} when the benchmark has not written them yet."""
  return _read_json(_written_results_path(name))


def read_recorded_results(name: str) -> dict:
  """bench/results/<name>.json, the figures of record, or {} when there are none."""
  return _read_json(results_path(name))


def write_results(name: str, payload: dict) -> str:
  """Writes the run's results (through a temporary file) and returns their path:
  bench/results/<name>.json for a run that records (records_run), else <name>.json in
  the run's own folder (run_dir), leaving the recorded file alone."""
  path = _written_results_path(name)
  with files.atomic_open(path) as f:
    json.dump(payload, f, indent=1, sort_keys=True)
  return path


def merge_results(name: str, key: str, entries: Dict[str, dict]) -> str:
  """Replaces the entries of payload[key] named in `entries` in the file write_results
  writes, keeping the others: a benchmark run on a few configurations or tasks at a
  time keeps one file whose every entry carries its own command and machine."""
  payload = read_results(name)
  payload.setdefault(key, {}).update(entries)
  return write_results(name, payload)


def _section_pattern(section: str):
  begin, end = f"<!-- BEGIN {section} -->", f"<!-- END {section} -->"
  return begin, end, re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)


def require_table(section: str) -> None:
  """Raises before a long run if bench/results/<section>.md lacks the markers its table
  goes between."""
  path = report.section_path(section)
  text = open(path).read() if os.path.exists(path) else ""
  begin, end, pattern = _section_pattern(section)
  if not pattern.search(text):
    raise ValueError(f"{path} has no section markers for '{section}': add the lines "
                     f"'{begin}' and '{end}' where its table belongs (and the section to "
                     f"bench/report.py's SECTIONS), or run with the flag that records "
                     f"nothing (--nowrite_readme)")


def update_table(section: str, markdown: str) -> None:
  """Replaces the text between `<!-- BEGIN section -->` and `<!-- END section -->` of
  bench/results/<section>.md, then rebuilds docs/benchmark-tables.md."""
  require_table(section)
  path = report.section_path(section)
  with open(path) as f:
    text = f.read()
  begin, end, pattern = _section_pattern(section)
  text = pattern.sub(lambda _: f"{begin}\n{markdown.rstrip()}\n{end}", text)
  with files.atomic_open(path) as f:
    f.write(text)
  report.write()


def markdown_table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for row in rows:
    lines.append("| " + " | ".join(str(c) for c in row) + " |")
  return "\n".join(lines)


machine_description = matmul_peak.machine_description
