r"""The quickstart: the whole BERT lifecycle on English text that ships with Python.

  python3 tools/setup_and_run.py quickstart     # sets up .venv, then runs this script

Every stage runs the command a user would type, printed before it runs:
  1. writes the embedded corpus (CPython's documentation topics, one sentence per line)
     and holds out every 10th document;
  2. learns an uncased WordPiece vocab from the training documents (tools/build_vocab.py);
  3. creates masked-LM / next-sentence TFRecords (tools/create_pretraining_data.py);
  4. pretrains a BERT-tiny-shaped model with MirroredStrategy over two logical CPU
     devices, evaluating on the held-out documents (tools/train.py); with
     --backend=jax, the same model and settings on JAX, data parallel over two host
     devices (XLA_FLAGS=--xla_force_host_platform_device_count=2);
  5. compares the held-out masked-LM accuracy with the unigram baseline (always predict
     the token most often masked in training) and fails if it is not at least
     --min_baseline_ratio times higher;
  6. exports the pretrained model as a fill-mask SavedModel taking raw text
     (tools/export_saved_model.py);
  7. asks the export from a fresh process (tools/query_saved_model.py).

Everything lands in --output_dir (default quickstart_output/), which is replaced on
each run.
"""

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

from absl import flags

from bert_tf import cpu_kernels

# Before TensorFlow loads: it reads its CPU kernels, device kinds and log level once,
# when imported.
cpu_kernels.prefer_onednn()
cpu_kernels.leave_out_absent_gpus()
cpu_kernels.quiet_startup_logs()

from bert_tf.data.creation import corpus
from bert_tf.utils import errors

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_OUTPUT_DIR = flags.DEFINE_string("output_dir", os.path.join(_ROOT, "quickstart_output"),
                                  "Where everything is written (replaced on each run).")
_TRAIN_STEPS = flags.DEFINE_integer("train_steps", 3000, "Pretraining steps.")
_VOCAB_SIZE = flags.DEFINE_integer(
    "vocab_size", 4000, "Target vocab size; the learner keeps only pieces seen at least 10 "
    "times, so this small corpus yields about a thousand.")
_DUPE_FACTOR = flags.DEFINE_integer("dupe_factor", 10,
                                    "Masking passes over the training documents.")
_BACKEND = flags.DEFINE_enum(
    "backend", "tensorflow", ["tensorflow", "jax"],
    "The Keras backend of the pretraining stage (tools/train.py --backend); every other "
    "stage is the same.")
_MIN_RATIO = flags.DEFINE_float(
    "min_baseline_ratio", 2.0, "Fail unless the held-out masked-LM accuracy is at least this "
    "many times the unigram baseline's.")

_EXPERIMENT = "pretraining_quickstart"
_STAGES = 7
_MARKER = ".bert_tf_quickstart"
_QUERIES = [
    "the [MASK] statement is used to leave a loop .",
    "if the key is not found , a [MASK] is raised .",
    "this function returns the [MASK] of the object .",
    "a list is a [MASK] sequence of objects .",
]
# TensorFlow's C++ start-up lines (absl format, written before logging is configured).
_NOISE = re.compile(r"^([IWEF]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\]|WARNING: All log messages "
                    r"before absl|To enable the following instructions|rebuild TensorFlow)")


def _stage(number: int, title: str) -> None:
  print(f"\n[{number}/{_STAGES}] {title}", flush=True)


def _run(argv, capture: bool = False, env_updates=None) -> str:
  """Runs a command (with env_updates added to the environment), showing its output
  without TensorFlow's start-up noise."""
  shown = [os.path.relpath(a, _ROOT) if a.startswith(_ROOT + os.sep) else a for a in argv]
  shown[0] = "python"
  prefix = "".join(f"{k}={shlex.quote(v)} " for k, v in (env_updates or {}).items())
  print("$ " + prefix + " ".join(shlex.quote(a) for a in shown), flush=True)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env_updates or {}))
  process = subprocess.Popen(argv, cwd=_ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, errors="replace")
  lines = []
  for line in process.stdout:
    lines.append(line)
    if not capture and not _NOISE.match(line):
      print("  " + line.rstrip("\n").split("\r")[-1], flush=True)
  if process.wait():
    if capture:
      sys.stdout.writelines(lines)
    raise SystemExit(f"quickstart: the command above failed (exit code {process.returncode})")
  return "".join(lines)


def _prepare_output_dir(path: str) -> None:
  """Replaces a previous quickstart's output; refuses to delete anything else."""
  if os.path.isdir(path) and os.listdir(path):
    if not os.path.exists(os.path.join(path, _MARKER)):
      raise SystemExit(f"quickstart: {path} exists and was not written by the quickstart; "
                       "pass another --output_dir")
    shutil.rmtree(path)
  os.makedirs(path, exist_ok=True)
  with open(os.path.join(path, _MARKER), "w", encoding="utf-8") as f:
    f.write("Written by tools/quickstart.py; replaced on each run.\n")


@contextlib.contextmanager
def _native_stderr_silenced():
  """Silences file descriptor 2: TensorFlow's C++ start-up lines bypass Python logging."""
  sys.stderr.flush()
  saved = os.dup(2)
  devnull = os.open(os.devnull, os.O_WRONLY)
  os.dup2(devnull, 2)
  try:
    yield
  finally:
    os.dup2(saved, 2)
    os.close(devnull)
    os.close(saved)


def _final_eval_metrics(model_dir: str) -> dict:
  from bert_tf.training import summaries  # pylint: disable=g-import-not-at-top
  scalars = summaries.read_scalars(os.path.join(model_dir, "eval"))
  if not scalars:
    raise SystemExit(f"quickstart: no evaluation was written under {model_dir}/eval")
  return {tag: values[-1][1] for tag, values in scalars.items()}


def main(argv):
  del argv
  start = time.time()
  out = os.path.abspath(_OUTPUT_DIR.value)
  _prepare_output_dir(out)
  python = sys.executable
  tool = lambda name: os.path.join(_ROOT, "tools", name)  # pylint: disable=unnecessary-lambda-assignment
  paths = {name: os.path.join(out, name) for name in (
      "corpus.txt", "train.txt", "heldout.txt", "vocab.txt", "data", "model", "export")}

  _stage(1, "Writing the embedded corpus (CPython's documentation topics)")
  stats = corpus.write_embedded_corpus(paths["corpus.txt"])
  train_docs, heldout_docs = corpus.split_documents(
      paths["corpus.txt"], paths["train.txt"], paths["heldout.txt"], heldout_every=10)
  print(f"  {stats.documents} documents, {stats.sentences:,} sentences, {stats.words:,} words "
        f"({stats.bytes / 1e3:.0f} kB); {train_docs} for training, {heldout_docs} held out")

  _stage(2, "Learning an uncased WordPiece vocab from the training documents")
  _run([python, tool("build_vocab.py"), f"--input={paths['train.txt']}",
        f"--output={paths['vocab.txt']}", f"--vocab_size={_VOCAB_SIZE.value}",
        "--lower_case"])
  with _native_stderr_silenced():
    from bert_tf.text import vocab as vocab_lib  # pylint: disable=g-import-not-at-top
  vocab = vocab_lib.load_vocab(paths["vocab.txt"])
  vocab_size = len(vocab)

  _stage(3, "Creating masked-LM and next-sentence TFRecords")
  data_flags = ["--seq_length=64", "--max_predictions_per_seq=10", "--lower_case",
                f"--vocab_file={paths['vocab.txt']}", "--noprogress"]
  train_data = os.path.join(paths["data"], "train")
  heldout_data = os.path.join(paths["data"], "heldout")
  _run([python, tool("create_pretraining_data.py"), f"--input_file={paths['train.txt']}",
        f"--output={train_data}", f"--dupe_factor={_DUPE_FACTOR.value}", "--num_shards=2",
        "--num_workers=2", *data_flags])
  _run([python, tool("create_pretraining_data.py"), f"--input_file={paths['heldout.txt']}",
        f"--output={heldout_data}", "--dupe_factor=2", "--num_shards=1", *data_flags])

  env_updates = None
  if _BACKEND.value == "jax":
    _stage(4, "Pretraining on JAX, data parallel over two host devices")
    env_updates = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
  else:
    _stage(4, "Pretraining with MirroredStrategy over two logical CPU devices")
  overrides = ",".join([
      f"model.encoder.vocab_size={vocab_size}",
      f"train_data.input_path={train_data}-*.tfrecord",
      f"eval_data.input_path={heldout_data}-*.tfrecord",
      f"tokenizer.vocab_file={paths['vocab.txt']}",
      f"trainer.train_steps={_TRAIN_STEPS.value}",
      f"trainer.checkpoint_interval={max(_TRAIN_STEPS.value // 2, 1)}",
      f"trainer.validation_interval={max(_TRAIN_STEPS.value // 2, 1)}",
  ] + (["runtime.distribution_strategy=one_device", "runtime.num_cpu_devices=0"]
       if _BACKEND.value == "jax" else []))
  _run([python, tool("train.py"), f"--experiment={_EXPERIMENT}",
        f"--model_dir={paths['model']}", "--mode=train_and_eval",
        f"--backend={_BACKEND.value}", f"--params_override={overrides}"],
       env_updates=env_updates)

  _stage(5, "Comparing the held-out masked-LM accuracy with input-blind baselines")
  with _native_stderr_silenced():
    import tensorflow  # pylint: disable=g-import-not-at-top,unused-import,import-outside-toplevel
  from bert_tf.data.records import baselines  # pylint: disable=g-import-not-at-top
  base = baselines.input_blind_baselines(f"{train_data}-*.tfrecord",
                                         f"{heldout_data}-*.tfrecord")
  metrics = _final_eval_metrics(paths["model"])
  accuracy = metrics["masked_lm_accuracy"]
  ratio = accuracy / max(base.unigram_masked_lm_accuracy, 1e-9)
  print(f"  masked-LM accuracy {accuracy:.1%} (perplexity {metrics['masked_lm_perplexity']:.1f})"
        f" vs. {base.unigram_masked_lm_accuracy:.1%} for always predicting "
        f"'{vocab[base.unigram_token_id]}': {ratio:.1f}x the unigram baseline")
  print(f"  next-sentence accuracy {metrics['next_sentence_accuracy']:.1%} vs. "
        f"{base.majority_next_sentence_accuracy:.1%} for always predicting the majority label")
  if ratio < _MIN_RATIO.value:
    raise SystemExit(f"quickstart: masked-LM accuracy is only {ratio:.2f}x the unigram "
                     f"baseline (expected at least {_MIN_RATIO.value}x)")

  _stage(6, "Exporting a fill-mask SavedModel that takes raw text")
  _run([python, tool("export_saved_model.py"), f"--checkpoint={paths['model']}",
        f"--export_dir={paths['export']}", "--version=1", "--top_k=3"])

  _stage(7, "Asking the export from a fresh process")
  export_version = os.path.join(paths["export"], "1")
  output = _run([python, tool("query_saved_model.py"), "--json", export_version, *_QUERIES],
                capture=True)
  for line in output.splitlines():
    if line.startswith("{"):
      result = json.loads(line)
      print(f"  {result['text']}")
      for candidates in result["masks"]:
        shown = ", ".join(f"{token} {probability:.2f}" for token, probability in candidates)
        print(f"      [MASK] -> {shown}")

  minutes, seconds = divmod(int(time.time() - start), 60)
  print(f"\nQuickstart done in {minutes}m{seconds:02d}s.\n"
        f"  checkpoints and params.yaml: {paths['model']}\n"
        f"  TensorBoard logs:            tensorboard --logdir {paths['model']}  "
        "(train/ and eval/)\n"
        f"  fill-mask SavedModel:        {export_version}  (TF Serving model_base_path: "
        f"{paths['export']})\n"
        f"  vocab and TFRecords:         {paths['vocab.txt']}, {paths['data']}")


def run():
  """The quickstart, as `python3 tools/quickstart.py` runs it."""
  errors.run_tool("quickstart", main)


if __name__ == "__main__":
  run()
