r"""Fine-tunes a BERT checkpoint on real tasks and reports their dev-set scores.

Tasks, read from --data_dir (default $BERT_TF_DATA; the layout of the public data kit):

* GLUE sst2, cola, mrpc, rte, stsb: glue_<task>/{train,dev}.tsv with the experiment
  official_configs/experiments/glue_<task>.yaml; the task's GLUE metric, beside always
  predicting the most frequent training label.
* conll2003: CoNLL-2003 English NER, conll2003/eng.train -> eng.testa with
  conll2003_ner.yaml, each word tagged at its first WordPiece; entity-level precision,
  recall and F1 (conlleval), beside tagging each word with its most frequent training
  tag. A sentence longer than the sequence is read in windows (task.window_stride), so
  every word is scored whatever --eval_seq_length.
* squad: SQuAD v1.1 exact match and F1. The kit holds only dev-v1.1.json, so its first
  --train_articles articles train and the other articles are evaluated (no paragraph in
  common); --squad_train_file trains on a real training file instead.

Each task's result (with the budget, the time and the load average) goes to its entry of
bench/results/accuracy.json, and its table (bench/results/accuracy.md) is rebuilt from
that file (--nowrite_readme records nothing; --report_only only rebuilds the table).

all-MiniLM-L6-v2 converted, and the command of each task's figure of record:
docs/benchmark-tables.md, "Fine-tuning accuracy from a real checkpoint".

--epochs sets the steps from the training-set size (--train_steps otherwise; SQuAD always
uses --train_steps). Without --init_checkpoint the encoder starts from random weights (a
smoke run of the pipeline, not a meaningful number).
"""

import collections
import json
import logging as std_logging
import math
import os
import time

from absl import app
from absl import flags
from absl import logging

from bench import common

GLUE = ("sst2", "cola", "mrpc", "rte", "stsb")
_TASKS = flags.DEFINE_list("tasks", [*GLUE, "squad", "conll2003"], "Tasks to run, in order: "
                           f"{', '.join(GLUE)}, squad, conll2003.")
common.define_data_dir_flag()
_CONFIG = flags.DEFINE_multi_string("config_file", [], "YAML with model.encoder (e.g. the "
                                    "converter's config.yaml), merged after the task's.")
_OVERRIDE = flags.DEFINE_string("params_override", None, "Further dotted overrides.")
_INIT = flags.DEFINE_string("init_checkpoint", "", "bert_tf checkpoint holding `encoder`.")
_VOCAB = flags.DEFINE_string("vocab_file", None, "The checkpoint's vocab.txt.")
_LOWER = flags.DEFINE_bool("lower_case", True, "Whether the vocab is uncased.")
_OUT = flags.DEFINE_string("output_dir", None, "Checkpoints and logs, one folder per task.")
_STEPS = flags.DEFINE_integer("train_steps", 300, "Optimizer steps per task (unless "
                              "--epochs is set).")
_EPOCHS = flags.DEFINE_float("epochs", 0.0, "When > 0: each GLUE or CoNLL task trains for "
                             "ceil(training examples x epochs / batch) steps.")
_BATCH = flags.DEFINE_integer("batch_size", 32, "Global batch size.")
_LR = flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate (10% warm-up, linear "
                         "decay).")
_SEQ = flags.DEFINE_integer("seq_length", 128, "Longest training sequence (batches are "
                            "padded to their longest example); SQuAD's window.")
_EVAL_SEQ = flags.DEFINE_integer("eval_seq_length", 0, "Longest evaluated sequence "
                                 "(0: --seq_length).")
_STRIDE = flags.DEFINE_integer("doc_stride", 128, "SQuAD: tokens between window starts.")
_TRAIN_ARTICLES = flags.DEFINE_integer("train_articles", 40, "SQuAD without "
                                       "--squad_train_file: dev articles used for training.")
_SQUAD_TRAIN = flags.DEFINE_string("squad_train_file", None, "SQuAD v1.1 train JSON.")
_MAX_TRAIN = flags.DEFINE_integer("max_train_questions", 0, "SQuAD: train on the first N "
                                  "questions (0: all).")
_MAX_EVAL = flags.DEFINE_integer("max_eval_questions", 0, "SQuAD: evaluate the first N "
                                 "questions (0: all).")
_REPORT_ONLY = flags.DEFINE_bool("report_only", False, "Train nothing: rebuild the table "
                                 "section from bench/results/accuracy.json.")
_WRITE_README = flags.DEFINE_bool("write_readme", True, "Record the run: "
                                  "bench/results/accuracy.json and its table.")

RESULTS = "accuracy"
_NAMES = {"sst2": "SST-2", "cola": "CoLA", "mrpc": "MRPC", "rte": "RTE", "stsb": "STS-B"}
# Table order of the results' keys.
ORDER = (*(f"glue_{t}" for t in GLUE), "squad_v1.1", "conll2003_ner")
HEADER = ("task", "train → evaluated", "dev result", "baseline", "budget", "time")


def lr_text(learning_rate: float) -> str:
  """5e-05 -> "5e-5", 0.0001 -> "1e-4", 1.5e-4 -> "1.5e-4"."""
  mantissa, exponent = f"{learning_rate:e}".split("e")
  return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def _shown(metrics) -> str:
  return ", ".join(f"{k} {100 * v:.1f}" for k, v in metrics.items() if k != "loss")


def _eval_seq() -> int:
  return _EVAL_SEQ.value or _SEQ.value


def _steps_and_epochs(num_train: int):
  steps = _STEPS.value
  if _EPOCHS.value > 0:
    steps = math.ceil(num_train * _EPOCHS.value / _BATCH.value)
  return steps, steps * _BATCH.value / num_train


def _budget(steps, epochs, of=""):
  return (f"{steps} steps ({epochs:.2f} epochs{of}), batch {_BATCH.value}, lr "
          f"{lr_text(_LR.value)}, seq {_SEQ.value}")


def _settings(steps, epochs, **more):
  return {"train_steps": steps, "epochs": epochs, "batch_size": _BATCH.value,
          "learning_rate": _LR.value, "seq_length": _SEQ.value,
          "eval_seq_length": _eval_seq(), "init_checkpoint": _INIT.value, **more}


def _train_and_evaluate(experiment, model_dir):
  """Trains, then evaluates; returns (metrics, seconds of both)."""
  from bert_tf.training import params_file  # pylint: disable=g-import-not-at-top
  from bert_tf.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
  start = time.time()
  trainer = trainer_lib.Trainer(experiment, model_dir,
                                log_fn=lambda line: print(line, flush=True))
  trainer.train()
  metrics = trainer.evaluate()
  # As tools/train.py does: the run's config beside its checkpoints, for the exporter.
  experiment.save(os.path.join(model_dir, params_file.PARAMS_FILE))
  return trainer, metrics, time.time() - start


def _resolve(experiment_name, train_path, eval_path, steps):
  """The named experiment with the checkpoint, the data and this run's budget."""
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  # At least 4 loops: the trainer's examples/s leaves out the first (tracing) loop.
  every = max(1, min(steps // 4, 50))
  overrides = [
      f"train_data.input_path={train_path}", f"eval_data.input_path={eval_path}",
      f"trainer.train_steps={steps}", f"trainer.steps_per_loop={every}",
      f"trainer.log_interval={every}", f"trainer.summary_interval={every}",
      f"trainer.checkpoint_interval={steps}", f"trainer.validation_interval={steps}",
      f"optimizer.learning_rate={_LR.value}", f"optimizer.warmup_steps={max(steps // 10, 1)}",
      f"task.init_checkpoint={_INIT.value}",
      f"train_data.seq_length={_SEQ.value}", f"eval_data.seq_length={_eval_seq()}",
      f"tokenizer.vocab_file={_VOCAB.value}",
      f"tokenizer.lower_case={str(_LOWER.value).lower()}",
  ]
  for section in ("train_data", "eval_data"):
    overrides += [f"{section}.global_batch_size={_BATCH.value}"]
  if _OVERRIDE.value:
    overrides.append(_OVERRIDE.value)
  return experiments.resolve_experiment(experiment_name, _CONFIG.value, ",".join(overrides))


def run_glue(task: str):
  """Fine-tunes on glue_<task>; returns (results key, payload)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from bert_tf.data.task_files import glue  # pylint: disable=g-import-not-at-top
  from bert_tf.metrics import classification  # pylint: disable=g-import-not-at-top
  train_path = common.data_path(f"glue_{task}", "train.tsv")
  dev_path = common.data_path(f"glue_{task}", "dev.tsv")
  train, dev = glue.read_glue_tsv(train_path, task), glue.read_glue_tsv(dev_path, task)
  spec = glue.GLUE_TASKS[task]
  if spec.score_range:  # A constant prediction has no correlation, reported as 0.
    baseline = {"pearson": 0.0, "spearman": 0.0}
  else:
    majority = collections.Counter(e.label for e in train).most_common(1)[0][0]
    ids = {name: i for i, name in enumerate(spec.label_names)}
    labels = np.asarray([ids[e.label] for e in dev])
    baseline = classification.glue_metrics(spec.metric, labels,
                                           np.full_like(labels, ids[majority]))
  steps, epochs = _steps_and_epochs(len(train))
  print(f"GLUE {task}: {len(train)} training examples, {len(dev)} dev examples; "
        f"{steps} steps = {epochs:.2f} epochs; majority-class baseline on dev: "
        f"{_shown(baseline)}; load {common.load_average()}", flush=True)
  experiment = _resolve(f"glue_{task}", train_path, dev_path, steps)
  _, metrics, seconds = _train_and_evaluate(experiment, os.path.join(_OUT.value, task))
  print(f"GLUE {task} dev: {_shown(metrics)} ({seconds:.0f}s)", flush=True)
  return f"glue_{task}", {
      "task": _NAMES.get(task, task),
      "data": f"glue_{task}/train.tsv ({len(train):,}) → dev.tsv ({len(dev):,})",
      "result": _shown(metrics), "baseline": "majority class: " + _shown(baseline),
      "budget": _budget(steps, epochs), "seconds": seconds, "metrics": metrics,
      "baseline_metrics": baseline, "settings": _settings(steps, epochs)}


def run_conll2003():
  """Fine-tunes on CoNLL-2003 NER; returns (results key, payload)."""
  from bert_tf.data.task_files import conll  # pylint: disable=g-import-not-at-top
  from bert_tf.metrics import tagging  # pylint: disable=g-import-not-at-top
  train_path = common.data_path("conll2003", "eng.train")
  eval_path = common.data_path("conll2003", "eng.testa")
  train, evaluated = conll.read_conll(train_path), conll.read_conll(eval_path)
  counts = collections.defaultdict(collections.Counter)
  for e in train:
    for word, tag in zip(e.words, e.tags):
      counts[word][tag] += 1
  best = {word: c.most_common(1)[0][0] for word, c in counts.items()}
  baseline = tagging.conll_precision_recall_f1(
      [e.tags for e in evaluated], [[best.get(w, "O") for w in e.words] for e in evaluated])
  steps, epochs = _steps_and_epochs(len(train))
  print(f"CoNLL-2003: {len(train)} training sentences, {len(evaluated)} evaluated; {steps} "
        f"steps = {epochs:.2f} epochs; per-word majority-tag baseline: entity F1 "
        f"{100 * baseline['f1']:.2f}; load {common.load_average()}", flush=True)
  experiment = _resolve("conll2003_ner", train_path, eval_path, steps)
  _, metrics, seconds = _train_and_evaluate(experiment, os.path.join(_OUT.value, "conll2003"))
  print(f"CoNLL-2003 dev: entity F1 {100 * metrics['f1']:.2f}, precision "
        f"{100 * metrics['precision']:.2f}, recall {100 * metrics['recall']:.2f} "
        f"({seconds:.0f}s)", flush=True)
  for name in sorted(k for k in metrics if k.endswith("/f1")):
    print(f"  {name[:-3]}: F1 {100 * metrics[name]:.2f} (baseline "
          f"{100 * baseline.get(name, 0.0):.2f})")
  return "conll2003_ner", {
      "task": "CoNLL-2003 NER",
      "data": (f"eng.train ({len(train):,} sentences) → eng.testa ({len(evaluated):,})"),
      "result": (f"entity F1 {100 * metrics['f1']:.1f} (P {100 * metrics['precision']:.1f}, "
                 f"R {100 * metrics['recall']:.1f})"),
      "baseline": f"most frequent tag per word: F1 {100 * baseline['f1']:.1f}",
      "budget": _budget(steps, epochs) + f" (eval {_eval_seq()})", "seconds": seconds,
      "metrics": metrics, "baseline_metrics": baseline, "settings": _settings(steps, epochs)}


def _squad_subset(data, first_article, last_article, max_questions):
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


def run_squad():
  """Fine-tunes on SQuAD v1.1; returns (results key, payload)."""
  from bert_tf.data.task_files import squad as squad_data  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import base as task_base  # pylint: disable=g-import-not-at-top
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  from bert_tf.utils import files  # pylint: disable=g-import-not-at-top
  out = os.path.join(_OUT.value, "squad")
  os.makedirs(out, exist_ok=True)
  dev = squad_data.load_squad_json(common.data_path("squad_v1.1", "dev-v1.1.json"))
  if _SQUAD_TRAIN.value:
    train, num_train = _squad_subset(squad_data.load_squad_json(_SQUAD_TRAIN.value), 0, None,
                                     _MAX_TRAIN.value)
    evaluated, num_eval = _squad_subset(dev, 0, None, _MAX_EVAL.value)
    data = (f"{os.path.basename(_SQUAD_TRAIN.value)} ({num_train:,} questions) → "
            f"dev-v1.1.json ({num_eval:,})")
  else:
    train, num_train = _squad_subset(dev, 0, _TRAIN_ARTICLES.value, _MAX_TRAIN.value)
    evaluated, num_eval = _squad_subset(dev, _TRAIN_ARTICLES.value, None, _MAX_EVAL.value)
    data = (f"dev-v1.1.json articles 0-{_TRAIN_ARTICLES.value - 1} ({num_train:,} "
            f"questions) → the other {len(evaluated)} articles ({num_eval:,} questions)")
  paths = {}
  for name, articles in (("train", train), ("eval", evaluated)):
    paths[name] = os.path.join(out, f"{name}_split.json")
    with files.atomic_open(paths[name], "w") as f:
      json.dump({"version": "1.1", "data": articles}, f)
  print(f"SQuAD v1.1: {num_train} training questions ({len(train)} articles), "
        f"{num_eval} evaluated ({len(evaluated)} articles); load {common.load_average()}",
        flush=True)
  steps = _STEPS.value
  data_config = {"format": "squad_json", "seq_length": _SEQ.value,
                 "global_batch_size": _BATCH.value}
  base = (experiments.experiment_from_yaml(*_CONFIG.value) if _CONFIG.value else
          experiments.experiment_from_dict({}))
  experiment = base.override({
      "task": {"name": "squad", "init_checkpoint": _INIT.value, "doc_stride": _STRIDE.value},
      "tokenizer": {"vocab_file": _VOCAB.value, "lower_case": _LOWER.value},
      "train_data": dict(data_config, input_path=paths["train"], is_training=True),
      "eval_data": dict(data_config, input_path=paths["eval"], is_training=False,
                        drop_remainder=False),
      "optimizer": {"learning_rate": _LR.value, "warmup_steps": max(steps // 10, 1)},
      "trainer": {"train_steps": steps, "steps_per_loop": 10, "checkpoint_interval": steps,
                  "log_interval": 10, "summary_interval": 10, "validation_interval": steps},
  }, task_configs=task_base.task_configs())
  trainer, metrics, seconds = _train_and_evaluate(experiment, os.path.join(out, "model"))
  num_windows = len(trainer.task.data_loader(experiment.train_data).arrays()[
      "unique_ids"])
  epochs = steps * _BATCH.value / num_windows
  print(f"SQuAD v1.1: exact_match {metrics['exact_match']:.2f}, f1 {metrics['f1']:.2f} on "
        f"{num_eval} questions ({seconds:.0f}s)", flush=True)
  return "squad_v1.1", {
      "task": "SQuAD v1.1", "data": data,
      "result": f"EM {metrics['exact_match']:.1f}, F1 {metrics['f1']:.1f}",
      "baseline": ("none computed; published on the full dev set (Rajpurkar et al. 2016): "
                   "sliding window F1 20.2, logistic regression F1 51.0"),
      "budget": (_budget(steps, epochs, f" of {num_windows:,} windows") +
                 f", stride {_STRIDE.value}"),
      "seconds": seconds, "metrics": metrics,
      "settings": _settings(steps, epochs, doc_stride=_STRIDE.value,
                            train_questions=num_train, train_windows=num_windows,
                            eval_questions=num_eval)}


def render(entries) -> str:
  """The table: one row per task, then each row's command."""
  keys = sorted(entries, key=lambda k: (ORDER.index(k) if k in ORDER else len(ORDER), k))
  if not keys:
    return "(not run yet) `python -m bench.accuracy ...`"
  rows = [entries[k] for k in keys]
  table = common.markdown_table(HEADER, [
      (r["task"], r["data"], r["result"], r["baseline"], r["budget"],
       f"{r['seconds'] / 60:.0f} min (load {r['load']})") for r in rows])
  commands = [f"- {r['task']} ({r['date']}): `{r['command']}`" for r in rows]
  return "\n".join([table, "", *commands])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  if not _REPORT_ONLY.value:
    for flag in (_VOCAB, _OUT):
      if not flag.value:
        raise app.UsageError(f"--{flag.name} is required")
    unknown = set(_TASKS.value) - {*GLUE, "squad", "conll2003"}
    if unknown:
      raise app.UsageError(f"Unknown tasks: {', '.join(sorted(unknown))}")
    if _WRITE_README.value:
      common.require_table(RESULTS)
    command = common.command_line()
    for task in _TASKS.value:
      key, payload = (run_squad() if task == "squad" else
                      run_conll2003() if task == "conll2003" else run_glue(task))
      payload.update(command=command, load=common.load_average(),
                     machine=common.machine_description(),
                     date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
      print(f"results: {common.merge_results(RESULTS, 'tasks', {key: payload})}", flush=True)
  section = render(common.read_results(RESULTS).get("tasks", {}))
  print(section)
  if _WRITE_README.value:
    common.update_table(RESULTS, section)


if __name__ == "__main__":
  std_logging.getLogger("tensorflow").setLevel(std_logging.ERROR)
  logging.set_verbosity(logging.WARNING)
  app.run(main)
