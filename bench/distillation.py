r"""A small student distilled from a fine-tuned teacher, against the same student
fine-tuned on the labels alone; dev accuracy and serving latency against the teacher.

  # The teacher: all-MiniLM-L6-v2 fine-tuned on SST-2 (bench/accuracy.py). The student:
  # its first 2 layers (model.encoder.num_layers=2, warm-started from the same
  # checkpoint, whose other layers are left unused).
  python -m bench.distillation --tasks=sst2 --data_dir=$BERT_TF_DATA \
    --teacher_dir=$PWD/runs/sst2_600/sst2 --config_file=runs/minilm/config.yaml \
    --params_override=model.encoder.num_layers=2 --init_checkpoint=$PWD/runs/minilm \
    --vocab_file=runs/minilm/vocab.txt --output_dir=runs/distillation \
    --train_steps=300 --batch_size=32 --seq_length=64 --learning_rate=1e-4

Both students train with bench/accuracy.py's experiment, flags and budget: `plain` is
the sentence_prediction task, `distilled` the distillation task
(bert_tf/tasks/distillation.py) with the teacher's encoder shape and checkpoint from
--teacher_dir (a sentence_prediction model_dir: params.yaml beside its checkpoints),
--temperature and --soft_loss_weight. The dev accuracy of each is the trainer's; the
teacher's is its export's on the same dev.tsv. Then the teacher and the plain student
are exported (tools/export_saved_model.py's path) and their serve_token_ids latency is
timed at batch 1 and --latency_batch_size, interleaved. bench/results/distillation.json
gets one entry per task.
"""

import os
import tempfile
import time

from absl import app
from absl import flags

from bench import accuracy
from bench import common
from bench import export_measures

FLAGS = flags.FLAGS
flags.DEFINE_string("teacher_dir", None, "The teacher's model_dir (params.yaml and checkpoints "
                    "of a sentence_prediction run on the same task).")
flags.DEFINE_float("temperature", 2.0, "task.temperature of the distilled student.")
flags.DEFINE_float("soft_loss_weight", 0.5, "task.soft_loss_weight of the distilled student.")
flags.DEFINE_integer("latency_iterations", 20, "Timed batch-1 calls per export.")
flags.DEFINE_integer("latency_batch_size", 32, "Batch size of the second latency figure.")
flags.DEFINE_integer("latency_batch_iterations", 5, "Timed calls at --latency_batch_size.")


def _distillation_config(task: str, directory: str) -> str:
  """Writes the YAML turning the GLUE experiment into a distillation from the teacher."""
  import yaml  # pylint: disable=g-import-not-at-top
  from bert_tf.export import exporter  # pylint: disable=g-import-not-at-top
  teacher = exporter.load_experiment(os.path.join(FLAGS.teacher_dir, "params.yaml"))
  path = os.path.join(directory, f"distill_{task}.yaml")
  with open(path, "w", encoding="utf-8") as f:
    yaml.safe_dump({"task": {
        "name": "distillation", "glue_task": task,
        "teacher_encoder": teacher.model.encoder.as_dict(),
        "teacher_checkpoint": FLAGS.teacher_dir, "temperature": FLAGS.temperature,
        "soft_loss_weight": FLAGS.soft_loss_weight}}, f)
  return path


def _train(task: str, method: str, extra_config: str):
  """Trains one student; returns (model_dir, dev metrics, examples/s, seconds)."""
  from bert_tf.training import params_file  # pylint: disable=g-import-not-at-top
  from bert_tf.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
  configs = list(FLAGS.config_file)
  FLAGS.config_file = configs + ([extra_config] if method == "distilled" else [])
  try:
    experiment = accuracy._resolve(  # pylint: disable=protected-access
        f"glue_{task}", common.data_path(f"glue_{task}", "train.tsv"),
        common.data_path(f"glue_{task}", "dev.tsv"), FLAGS.train_steps)
  finally:
    FLAGS.config_file = configs
  model_dir = os.path.join(FLAGS.output_dir, f"{task}_{method}")
  print(f"[{task} {method}] load {common.load_average()}", flush=True)
  trainer = trainer_lib.Trainer(experiment, model_dir,
                                log_fn=lambda line: print(line, flush=True))
  start = time.time()
  report = trainer.train()
  seconds = time.time() - start
  metrics = {k: v for k, v in trainer.evaluate().items() if k != "loss"}
  experiment.save(os.path.join(model_dir, params_file.PARAMS_FILE))
  print(f"[{task} {method}] dev {metrics}, {report.get('sequences_per_second', 0):.1f} "
        f"examples/s, {seconds:.0f}s", flush=True)
  return model_dir, metrics, report.get("sequences_per_second"), seconds


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  common.require_flags("teacher_dir", "vocab_file", "output_dir")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.export import exporter  # pylint: disable=g-import-not-at-top
  tmp = tempfile.mkdtemp(prefix="distillation_")
  entries = {}
  for task in FLAGS.tasks:
    extra = _distillation_config(task, tmp)
    students = {method: _train(task, method, extra) for method in ("plain", "distilled")}
    served = {"teacher": FLAGS.teacher_dir, "student": students["plain"][0]}
    signatures, sizes = {}, {}
    for name, model_dir in served.items():
      experiment = exporter.load_experiment(os.path.join(model_dir, "params.yaml"))
      experiment = experiment.override({"eval_data": {"seq_length": FLAGS.seq_length}})
      path = exporter.export_from_checkpoint(model_dir, experiment, os.path.join(tmp, name))
      signatures[name] = tf.saved_model.load(path).signatures["serve_token_ids"]
      sizes[name] = export_measures.directory_bytes(path) / 2 ** 20
    teacher_experiment = exporter.load_experiment(
        os.path.join(FLAGS.teacher_dir, "params.yaml")).override(
            {"eval_data": {"seq_length": FLAGS.seq_length}})
    teacher_accuracy = export_measures.classifier_dev_accuracy(
        {"teacher": signatures["teacher"]}, teacher_experiment, task, FLAGS.batch_size)
    latency = export_measures.token_ids_latency_ms(
        signatures, teacher_experiment.model.encoder.vocab_size, FLAGS.seq_length,
        {1: FLAGS.latency_iterations,
         FLAGS.latency_batch_size: FLAGS.latency_batch_iterations})
    entry = {
        "command": common.command_line(), "machine": common.machine_description(),
        "load_average": common.load_average(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "budget": (f"{FLAGS.train_steps} steps, batch {FLAGS.batch_size}, seq "
                   f"{FLAGS.seq_length}, lr {FLAGS.learning_rate:g}; T {FLAGS.temperature:g}, "
                   f"soft loss weight {FLAGS.soft_loss_weight:g}"),
        "teacher": {"dev_accuracy": teacher_accuracy["teacher"], "saved_model_mb":
                    sizes["teacher"], "latency_ms": latency["teacher"]},
        "student_latency_ms": latency["student"], "student_saved_model_mb": sizes["student"],
    }
    for method, (_, metrics, rate, seconds) in students.items():
      entry[method] = {"dev_accuracy": 100 * metrics["accuracy"], "metrics": metrics,
                       "examples_per_second": rate, "train_seconds": seconds}
    print(f"{task}: teacher {entry['teacher']['dev_accuracy']:.1f}, distilled "
          f"{entry['distilled']['dev_accuracy']:.1f}, plain {entry['plain']['dev_accuracy']:.1f}"
          f"; latency ms teacher {latency['teacher']}, student {latency['student']}; load "
          f"{entry['load_average']}", flush=True)
    entries[task] = entry
  common.merge_results("distillation", "tasks", entries)


if __name__ == "__main__":
  app.run(main)
