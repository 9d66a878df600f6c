r"""int8 against float32 exports of one classifier: dev accuracy, size, CPU latency.

  # A fine-tuned run (e.g. the converted all-MiniLM-L6-v2 fine-tuned on SST-2, README
  # *Released checkpoints*), scored on the GLUE dev set under --data_dir:
  python3 bench/int8_serving.py --checkpoint=runs/minilm_sst2 --glue_task=sst2
  # A BERT-base-shaped classifier with random weights (latency and size only):
  python3 bench/int8_serving.py --size=base

exports the classifier twice with bert_tf.export.exporter.export_from_checkpoint, float32
and with quantize_mode=int8 (tools/export_saved_model.py --quantize=int8), and reports
each SavedModel's size on disk, dev accuracy through serve_token_ids (with --glue_task)
and the serve_token_ids latency at batch 1 (p50 over --iterations calls) and batch 32
(median over --batch_iterations calls), the two exports interleaved call by call. It
writes bench/results/int8_serving.json.
"""

import os
import sys
import tempfile

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_string("checkpoint", None, "A fine-tuned classifier's model_dir (params.yaml "
                    "beside its checkpoints); default: random weights of --size.")
flags.DEFINE_string("size", "base", "Encoder size of the random-weight classifier.")
flags.DEFINE_string("glue_task", None, "Score dev accuracy on <data_dir>/glue_<task>/dev.tsv.")
flags.DEFINE_integer("seq_length", 128, "Packed sequence length.")
flags.DEFINE_integer("iterations", 30, "Timed batch-1 calls per export.")
flags.DEFINE_integer("batch_iterations", 5, "Timed batch-32 calls per export.")
flags.DEFINE_integer("batch_size", 32, "Batch size of the throughput measurement.")
flags.DEFINE_integer("max_dev_examples", 0, "Score at most this many dev examples (0: all).")
common.define_data_dir_flag()


def _directory_bytes(path):
  return sum(os.path.getsize(os.path.join(root, name))
             for root, _, names in os.walk(path) for name in names)


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
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.export import exporter  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import base  # pylint: disable=g-import-not-at-top
  tmp = tempfile.mkdtemp(prefix="int8_serving_")
  if FLAGS.checkpoint:
    checkpoint, experiment = FLAGS.checkpoint, exporter.load_experiment(
        os.path.join(FLAGS.checkpoint, "params.yaml"))
  else:
    checkpoint, experiment = _random_run(tmp)
  experiment = experiment.override({"eval_data": {"seq_length": FLAGS.seq_length}})
  paths = {mode or "float32": exporter.export_from_checkpoint(
      checkpoint, experiment, os.path.join(tmp, mode or "float32"), quantize_mode=mode)
           for mode in (None, "int8")}
  signatures = {name: tf.saved_model.load(path).signatures["serve_token_ids"]
                for name, path in paths.items()}
  results = {name: {"saved_model_mb": _directory_bytes(path) / 2 ** 20}
             for name, path in paths.items()}

  if FLAGS.glue_task:
    dev = experiment.override({"eval_data": {
        "input_path": common.data_path(f"glue_{FLAGS.glue_task}", "dev.tsv"), "format": "tsv",
        "global_batch_size": FLAGS.batch_size, "is_training": False,
        "drop_remainder": False}})
    task = base.get_task(dev)
    correct, count = {name: 0 for name in signatures}, 0
    for batch in task.build_inputs(dev.eval_data):
      inputs = {k: batch[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
      labels = batch["label_ids"].numpy()
      for name, signature in signatures.items():
        predicted = np.argmax(signature(**inputs)["probabilities"].numpy(), axis=-1)
        correct[name] += int(np.sum(predicted == labels))
      count += len(labels)
      if FLAGS.max_dev_examples and count >= FLAGS.max_dev_examples:
        break
    for name in signatures:
      results[name]["dev_accuracy"] = 100.0 * correct[name] / count
      results[name]["dev_examples"] = count

  rng = np.random.default_rng(0)
  vocab_size = experiment.model.encoder.vocab_size
  ids = {"input_word_ids": rng.integers(5, vocab_size, (FLAGS.batch_size, FLAGS.seq_length)),
         "input_mask": np.ones((FLAGS.batch_size, FLAGS.seq_length)),
         "input_type_ids": np.zeros((FLAGS.batch_size, FLAGS.seq_length))}
  ids = {k: tf.constant(v, tf.int32) for k, v in ids.items()}
  for n, rounds, key in ((1, FLAGS.iterations, "batch1_ms"),
                         (FLAGS.batch_size, FLAGS.batch_iterations, f"batch{FLAGS.batch_size}_ms")):
    sliced = {k: v[:n] for k, v in ids.items()}
    calls = {name: (lambda s=signature: s(**sliced)["probabilities"].numpy())
             for name, signature in signatures.items()}
    common.interleaved_times(calls, 2)  # warm-up
    times = common.interleaved_times(calls, rounds)
    for name in signatures:
      results[name][key] = 1000 * common.median(times[name])
  for name, row in results.items():
    print(name, {k: round(v, 2) for k, v in row.items()}, flush=True)
  f32, int8 = results["float32"], results["int8"]
  print(f"int8 / float32: size {int8['saved_model_mb'] / f32['saved_model_mb']:.2f}x, "
        f"batch-{FLAGS.batch_size} speed-up {f32[f'batch{FLAGS.batch_size}_ms'] / int8[f'batch{FLAGS.batch_size}_ms']:.2f}x")
  common.write_results("int8_serving", {"command": common.command_line(),
                                        "machine": common.machine_description(),
                                        "results": results})


if __name__ == "__main__":
  app.run(main)
