r"""int8 and bf16 against float32 exports of one classifier: dev accuracy, size, CPU
latency.

  # A fine-tuned run (e.g. the converted all-MiniLM-L6-v2 fine-tuned on SST-2, README
  # *Released checkpoints*), scored on the GLUE dev set under --data_dir:
  python3 -m bench.int8_serving --checkpoint=runs/minilm_sst2 --glue_task=sst2
  # A BERT-base-shaped classifier with random weights (latency and size only):
  python3 -m bench.int8_serving --size=base
  # bf16 alone against float32:
  python3 -m bench.int8_serving --size=base --modes=bfloat16

exports the classifier with bert_tf.export.exporter.export_from_checkpoint in float32
and in each --modes quantize_mode (tools/export_saved_model.py --quantize=MODE: int8,
int8_dynamic, int8_onednn, bfloat16), and
reports each SavedModel's size on disk, dev accuracy through serve_token_ids (with
--glue_task) and the serve_token_ids latency at batch 1 (median over --iterations
calls) and batch 32 (median over --batch_iterations calls), the exports interleaved
call by call, with the load average before and after. Each run replaces its entry
(--size, or the checkpoint's folder name) of bench/results/int8_serving.json.
"""

import os
import tempfile

from absl import app
from absl import flags

from bench import common
from bench import export_measures

FLAGS = flags.FLAGS
flags.DEFINE_string("checkpoint", None, "A fine-tuned classifier's model_dir (params.yaml "
                    "beside its checkpoints); default: random weights of --size.")
common.define_shape_flags(batch_help="Batch size of the throughput measurement.")
flags.DEFINE_string("glue_task", None, "Score dev accuracy on <data_dir>/glue_<task>/dev.tsv.")
flags.DEFINE_integer("iterations", 30, "Timed batch-1 calls per export.")
flags.DEFINE_integer("batch_iterations", 5, "Timed batch-32 calls per export.")
flags.DEFINE_integer("max_dev_examples", 0, "Score at most this many dev examples (0: all).")
flags.DEFINE_list("modes", ["int8", "int8_dynamic", "int8_onednn", "bfloat16"],
                  "Quantize modes (exporter.QUANTIZE_MODES) compared with float32.")
common.define_data_dir_flag()


def _random_run(tmp):
  """(checkpoint, experiment) of a --size classifier with random weights."""
  import keras  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import base  # pylint: disable=g-import-not-at-top
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  vocab = os.path.join(tmp, "vocab.txt")
  with open(vocab, "w", encoding="utf-8") as f:
    f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                      + [f"w{i}" for i in range(30517)]) + "\n")
  data = {"seq_length": FLAGS.seq_length}
  experiment = experiments.experiment_from_dict({
      "task": {"name": "sentence_prediction", "num_classes": 2},
      "model": {"encoder": configs.EncoderConfig.from_size(FLAGS.size).as_dict()},
      "tokenizer": {"vocab_file": vocab}, "train_data": data, "eval_data": data})
  keras.utils.set_random_seed(0)
  model = base.get_task(experiment).build_model()
  prefix = tf.train.Checkpoint(**model.checkpoint_items).save(os.path.join(tmp, "ckpt"))
  return prefix, experiment


def main(argv):
  del argv
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.export import exporter  # pylint: disable=g-import-not-at-top
  from bert_tf.export import int8_onednn  # pylint: disable=g-import-not-at-top
  unknown = sorted(set(FLAGS.modes) - set(exporter.QUANTIZE_MODES))
  if unknown:
    raise app.UsageError(f"--modes: unknown {unknown}; the modes are "
                         f"{', '.join(exporter.QUANTIZE_MODES)}")
  if exporter.INT8_ONEDNN in FLAGS.modes and not int8_onednn.available():
    print("int8_onednn left out: this TensorFlow cannot run oneDNN's int8 matmul",
          flush=True)
    FLAGS.modes = [mode for mode in FLAGS.modes if mode != exporter.INT8_ONEDNN]
  tmp = tempfile.mkdtemp(prefix="int8_serving_")
  if FLAGS.checkpoint:
    checkpoint, experiment = FLAGS.checkpoint, exporter.load_experiment(
        os.path.join(FLAGS.checkpoint, "params.yaml"))
  else:
    checkpoint, experiment = _random_run(tmp)
  experiment = experiment.override({"eval_data": {"seq_length": FLAGS.seq_length}})
  load_before = os.getloadavg()
  paths = {mode or "float32": exporter.export_from_checkpoint(
      checkpoint, experiment, os.path.join(tmp, mode or "float32"), quantize_mode=mode)
           for mode in (None, *FLAGS.modes)}
  signatures = {name: tf.saved_model.load(path).signatures["serve_token_ids"]
                for name, path in paths.items()}
  results = {name: {"saved_model_mb": export_measures.directory_bytes(path) / 2 ** 20}
             for name, path in paths.items()}
  if FLAGS.glue_task:
    accuracy = export_measures.classifier_dev_accuracy(
        signatures, experiment, FLAGS.glue_task, FLAGS.batch_size, FLAGS.max_dev_examples)
    for name in signatures:
      results[name].update(dev_accuracy=accuracy[name], dev_examples=accuracy["dev_examples"])
  latency = export_measures.token_ids_latency_ms(
      signatures, experiment.model.encoder.vocab_size, FLAGS.seq_length,
      {1: FLAGS.iterations, FLAGS.batch_size: FLAGS.batch_iterations})
  for name in signatures:
    results[name]["batch1_ms"] = latency[name][1]
    results[name][f"batch{FLAGS.batch_size}_ms"] = latency[name][FLAGS.batch_size]
  load = " / ".join(f"{a:.1f}-{b:.1f}" for a, b in zip(load_before, os.getloadavg()))
  for name, row in results.items():
    print(name, {k: round(v, 2) for k, v in row.items()}, flush=True)
  f32 = results["float32"]
  batch_key = f"batch{FLAGS.batch_size}_ms"
  for mode in FLAGS.modes:
    row = results[mode]
    print(f"{mode} / float32: size {row['saved_model_mb'] / f32['saved_model_mb']:.2f}x, "
          f"batch-1 speed-up {f32['batch1_ms'] / row['batch1_ms']:.2f}x, "
          f"batch-{FLAGS.batch_size} speed-up {f32[batch_key] / row[batch_key]:.2f}x")
  print(f"load average (1/5/15 min, before-after): {load}")
  # The run's entry: the checkpoint's last two path parts (output_dir/task), or the size.
  name = ("/".join(os.path.normpath(FLAGS.checkpoint).split(os.sep)[-2:]) if FLAGS.checkpoint
          else FLAGS.size)
  common.merge_results("int8_serving", "runs", {name: {
      "command": common.command_line(), "machine": common.machine_description(),
      "load_average": load, "results": results}})


if __name__ == "__main__":
  app.run(main)
