r"""bert_tf's export kinds against float32 and against ONNX Runtime and OpenVINO on the
same weights: size, agreement, dev accuracy, batch-1 latency (p50, p99) and batch-32
throughput, every system a worker process (bench/driver.py) of interleaved rounds.

  python -m bench.int8_serving --size=base --peers=onnxruntime,openvino --install_peers
  python -m bench.int8_serving --size=base --peers=onnxruntime,openvino --compete  # loaded
  python -m bench.int8_serving --checkpoint=runs/minilm_sst2 --glue_task=sst2 \
      --seq_length=64 --peers=onnxruntime,openvino

The weights: --checkpoint (a fine-tuned run or a converted folder, written as Hugging Face
for the peers), or random ones of --size written as a Hugging Face
BertForSequenceClassification and converted into bert_tf. bert_tf exports float32 and
each --modes quantize mode, and times raw text in (`float32_text`); each --peers stack
exports and quantizes the Hugging Face folder in its own venv (bench/peers/cpu_serving.py).
All get the same token ids: each first returns its log-probabilities on padded rows
(agreement with bert_tf's float32) and the dev set (--glue_task); then, round after
round, --iterations batch-1 calls each, then --batch_iterations at --batch_size. The
static quantizers calibrate on --calibration_rows rows (train.tsv, or random ids). Each
run replaces its entry (--size or the checkpoint's folder, `_compete` when loaded) of
bench/results/int8_serving.json (--nowrite_readme: the run's own folder).
"""

import os
import shutil
import sys
import tempfile

from absl import app
from absl import flags

from bench import common
from bench import driver
from bench import export_measures
from bench import peer_envs
from bench import stats
from bench.peers import cpu_serving
from bench.peers import protocol

FLAGS = flags.FLAGS
RESULTS = "int8_serving"
flags.DEFINE_string("checkpoint", None, "A fine-tuned classifier's model_dir or a "
                    "converted folder (params.yaml beside its checkpoints); default: "
                    "random weights of --size.")
common.define_shape_flags(batch_help="Batch size of the throughput measurement.")
flags.DEFINE_string("glue_task", None, "Score dev accuracy on <data_dir>/glue_<task>/dev.tsv.")
flags.DEFINE_integer("rounds", 5, "Interleaved rounds at each batch size.")
flags.DEFINE_integer("iterations", 20, "Timed batch-1 calls per system per round.")
flags.DEFINE_integer("batch_iterations", 2, "Timed --batch_size calls per system per round.")
flags.DEFINE_integer("max_dev_examples", 0, "Score at most this many dev examples (0: all).")
flags.DEFINE_integer("calibration_rows", 64, "Rows the static int8 quantizers calibrate on.")
flags.DEFINE_list("modes", ["int8", "int8_dynamic", "int8_onednn", "bfloat16"],
                  "Quantize modes (exporter.QUANTIZE_MODES) compared with float32.")
flags.DEFINE_list("peers", [], f"Serving stacks beside bert_tf: {', '.join(cpu_serving.VARIANTS)}.")
flags.DEFINE_integer("threads", 0, "Threads of one call of every system (0: each one's default).")
flags.DEFINE_bool("install_peers", False, "Create the peers' virtual environments first.")
flags.DEFINE_string("venv_root", peer_envs.DEFAULT_VENV_ROOT, "Where the peers' venvs live.")
flags.DEFINE_bool("write_readme", True, "Record the run in bench/results/int8_serving.json "
                  "(without it, the results go to the run's own folder).")
driver.define_protocol_flags()
common.define_data_dir_flag()


def _random_run(tmp):
  """(bert_tf folder, Hugging Face folder) of a --size classifier with random weights:
  written as Hugging Face, then converted into bert_tf as a user's model is."""
  import keras  # pylint: disable=g-import-not-at-top
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import convert  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import writing  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import base  # pylint: disable=g-import-not-at-top
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  vocab = os.path.join(tmp, "vocab.txt")
  encoder = configs.EncoderConfig.from_size(FLAGS.size)
  with open(vocab, "w", encoding="utf-8") as f:
    f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                      + [f"w{i}" for i in range(encoder.vocab_size - 5)]) + "\n")
  data = {"seq_length": FLAGS.seq_length}
  experiment = experiments.experiment_from_dict({
      "task": {"name": "sentence_prediction", "num_classes": 2},
      "model": {"encoder": encoder.as_dict()},
      "tokenizer": {"vocab_file": vocab}, "train_data": data, "eval_data": data})
  keras.utils.set_random_seed(0)
  model = base.get_task(experiment).build_model()
  hf_dir, bert_tf_dir = os.path.join(tmp, "huggingface"), os.path.join(tmp, "bert_tf")
  writing.save_checkpoint(model, vocab, hf_dir, "huggingface")
  convert.convert_checkpoint(hf_dir, bert_tf_dir)
  return bert_tf_dir, hf_dir


def serving_arrays(experiment, path):
  """Writes the run's arrays (protocol.py) to `path`; returns the dev labels or None."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  length, vocab = FLAGS.seq_length, experiment.model.encoder.vocab_size

  def random_rows(count, full):
    lengths = np.full(count, length) if full else rng.integers(length // 4, length + 1, count)
    positions = np.arange(length)[None, :]
    mask = (positions < lengths[:, None]).astype(np.int32)
    return {"input_word_ids": rng.integers(5, vocab, (count, length)).astype(np.int32) * mask,
            "input_mask": mask,
            "input_type_ids": ((positions >= lengths[:, None] // 2) * mask).astype(np.int32)}

  sets = {"timing": random_rows(FLAGS.batch_size, True), "agreement": random_rows(16, False)}
  with open(experiment.tokenizer.vocab_file, encoding="utf-8") as f:
    words = [w for w in f.read().split() if w.isalnum()]  # no "##" pieces, no [CLS]
  texts = [" ".join(rng.choice(words, length)) for _ in range(FLAGS.batch_size)]
  if FLAGS.glue_task:
    sets["calibration"] = export_measures.glue_token_ids(
        experiment, FLAGS.glue_task, "train", FLAGS.calibration_rows)
    sets["dev"] = export_measures.glue_token_ids(
        experiment, FLAGS.glue_task, "dev", FLAGS.max_dev_examples)
  else:
    sets["calibration"] = random_rows(FLAGS.calibration_rows, False)
  arrays = {f"{name}_{key}": rows[key] for name, rows in sets.items()
            for key in protocol.TOKEN_ID_NAMES}
  labels = sets["dev"]["labels"] if FLAGS.glue_task else None
  np.savez(path, **arrays, timing_text=np.array(texts))
  return labels


def worker_specs(paths, peers, hf_dir, tmp, batch, scored):
  """[(name, argv, env)] of every system at `batch`; with `scored`, each writes its
  log-probabilities to <tmp>/scores/<name>.npz."""
  shared = ["--inputs", os.path.join(tmp, "arrays.npz"), "--batch_size", str(batch),
            "--threads", str(FLAGS.threads)]
  outputs = lambda name: ["--outputs", os.path.join(tmp, "scores", f"{name}.npz")] if scored else []
  ours = [(name, ["--saved_model", path, *outputs(name)]) for name, path in paths.items()]
  ours.append(("float32_text", ["--text", "--saved_model", paths["float32"]]))
  specs = [(name, [sys.executable, "-m", "bench.ours_serving_worker", *args, *shared],
            {"CUDA_VISIBLE_DEVICES": ""}) for name, args in ours]
  for peer in peers:
    for variant in cpu_serving.VARIANTS[peer]:
      name = f"{peer}_{variant}"
      specs.append((name, [peer_envs.peer_python(peer, FLAGS.venv_root), "-m",
                           "bench.peers.cpu_serving", "--stack", peer, "--variant", variant,
                           "--hf_dir", hf_dir, "--work_dir", tmp, *shared, *outputs(name)],
                    {"CUDA_VISIBLE_DEVICES": ""}))
  return specs


def main(argv):
  del argv
  import numpy as np  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import convert  # pylint: disable=g-import-not-at-top
  from bert_tf.export import exporter  # pylint: disable=g-import-not-at-top
  from bert_tf.training import trained_model  # pylint: disable=g-import-not-at-top
  from bert_tf.export import int8_onednn  # pylint: disable=g-import-not-at-top
  for flag, known in (("modes", exporter.QUANTIZE_MODES), ("peers", cpu_serving.VARIANTS)):
    unknown = sorted(set(FLAGS[flag].value) - set(known))
    if unknown:
      raise app.UsageError(f"--{flag}: unknown {unknown}; the {flag} are {', '.join(known)}")
  driver.check_rounds_of_record(FLAGS.rounds, FLAGS.write_readme)
  peers = peer_envs.ready_peers(FLAGS.peers, FLAGS.install_peers, FLAGS.venv_root)
  if exporter.INT8_ONEDNN in FLAGS.modes and not int8_onednn.available():
    print("int8_onednn left out: this TensorFlow cannot run oneDNN's int8 matmul",
          flush=True)
    FLAGS.modes = [mode for mode in FLAGS.modes if mode != exporter.INT8_ONEDNN]
  tmp = tempfile.mkdtemp(prefix="int8_serving_", dir=common.run_dir())
  os.makedirs(os.path.join(tmp, "scores"))
  if FLAGS.checkpoint:
    checkpoint, hf_dir = FLAGS.checkpoint, os.path.join(tmp, "huggingface")
    if peers:
      convert.convert_checkpoint(checkpoint, hf_dir, output_format="huggingface")
  else:
    checkpoint, hf_dir = _random_run(tmp)
  experiment = trained_model.load_experiment(os.path.join(checkpoint, "params.yaml")).override(
      {"eval_data": {"seq_length": FLAGS.seq_length}})
  paths = {mode or "float32": exporter.export_from_checkpoint(
      checkpoint, experiment, os.path.join(tmp, mode or "float32"), quantize_mode=mode)
           for mode in (None, *FLAGS.modes)}
  labels = serving_arrays(experiment, os.path.join(tmp, "arrays.npz"))
  rounds, infos, loads = {}, {}, {}
  for batch, calls in ((1, FLAGS.iterations), (FLAGS.batch_size, FLAGS.batch_iterations)):
    print(f"batch {batch}: {FLAGS.rounds} rounds x {calls} calls", flush=True)
    workers = driver.start_sequential(
        worker_specs(paths, peers, hf_dir, tmp, batch, scored=batch == 1))
    records = driver.alternate(workers, FLAGS.rounds, calls, FLAGS.quiet_load,
                               FLAGS.quiet_timeout, FLAGS.compete)
    loads[batch] = stats.load_summary(records)
    for worker in workers:
      rounds.setdefault(worker.name, {})[batch] = worker.rounds
      infos[worker.name] = dict(worker.info, peak_rss_mb=worker.peak_rss_mb)
  scores = {name: dict(np.load(os.path.join(tmp, "scores", f"{name}.npz")))
            for name in rounds if name != "float32_text"}
  results = export_measures.serving_summary(rounds, scores, labels)
  paths["float32_text"] = paths["float32"]
  sizes = {name: (export_measures.directory_bytes(paths[name]) / 2 ** 20 if name in paths
                  else infos[name]["model_mb"]) for name in results}
  for name, row in results.items():
    row.update(model_mb=sizes[name], info=infos[name])
  print(export_measures.summary_table(results, sizes, FLAGS.batch_size))
  for batch in (1, FLAGS.batch_size):
    for name, best in export_measures.best_peer_ratios(results, batch).items():
      print(f"batch {batch}: {name} / fastest {export_measures.PRECISIONS[name]} peer "
            f"({best['peer']}): {best['ratio']:.2f}x")
  print(f"load: batch 1 {loads[1]}; batch {FLAGS.batch_size} {loads[FLAGS.batch_size]}")
  # The run's entry: the checkpoint's last two path parts (output_dir/task), or the size.
  name = ("/".join(os.path.normpath(FLAGS.checkpoint).split(os.sep)[-2:]) if FLAGS.checkpoint
          else FLAGS.size) + ("_compete" if FLAGS.compete else "")
  path = common.merge_results(RESULTS, "runs", {name: {
      "command": common.command_line(), "machine": common.machine_description(),
      "load": loads, "rounds": FLAGS.rounds, "results": results}})
  print(f"results: {path}")
  shutil.rmtree(tmp, ignore_errors=True)
  disagree = [n for n, row in results.items() if row.get("agrees") is False]
  if disagree:
    raise SystemExit(f"Not the same model: {', '.join(disagree)} differ from bert_tf's "
                     f"float32 export by more than {export_measures.FLOAT32_TOLERANCE:g}")


if __name__ == "__main__":
  app.run(main)
