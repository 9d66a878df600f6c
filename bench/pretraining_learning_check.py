"""Pretrains a small BERT on WikiText-2 for a fixed budget and reports what it learned.

Not a unit test: a check that pretraining learns on real text. It splits the documents
of a one-sentence-per-line corpus into training and held-out documents, creates
pretraining TFRecords for both, trains for --train_steps steps, evaluates the held-out
masked-LM accuracy every --eval_every steps, and compares the final masked-LM and
next-sentence accuracies with baselines that ignore the input:
  unigram: always predict the token most often masked in the training data;
  next-sentence majority: always predict the more frequent training label.
The curve, the baselines, the time and the load average go to
bench/results/pretraining_learning_check.json and the "pretraining learning check"
section of bench/README.md (--nowrite_readme leaves the README alone).

  python bench/pretraining_learning_check.py \\
    --corpus=/work/shared/data/wikitext2_raw/wikitext2_valid_test.bertfmt.txt \\
    --vocab_file=/work/shared/data/bert_vocab/uncased/vocab.txt --output_dir=/tmp/lc
"""

import os
import sys
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position

_CORPUS = flags.DEFINE_string(
    "corpus", None, "Text file: one sentence per line, blank line between documents.")
_VOCAB = flags.DEFINE_string("vocab_file", None, "WordPiece vocab (uncased).")
_OUTPUT = flags.DEFINE_string("output_dir", None, "Data, checkpoints and logs go here.")
_SIZE = flags.DEFINE_string("size", "mini", "Encoder size (tiny, mini, small, ...).")
_STEPS = flags.DEFINE_integer("train_steps", 2000, "Training steps (the budget).")
_EVAL_EVERY = flags.DEFINE_integer("eval_every", 250, "Steps between evaluations.")
_BATCH = flags.DEFINE_integer("batch_size", 32, "Global batch size.")
_SEQ = flags.DEFINE_integer("seq_length", 128, "Sequence length.")
_PREDICTIONS = flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions.")
_LR = flags.DEFINE_float("learning_rate", 5e-4, "Peak learning rate.")
_HELDOUT = flags.DEFINE_float("heldout_fraction", 0.1, "Documents held out.")
_DUPE = flags.DEFINE_integer("dupe_factor", 5, "Masking passes over the training text.")
_STRATEGY = flags.DEFINE_string("distribution_strategy", "one_device", "Strategy.")
_WRITE_README = flags.DEFINE_bool("write_readme", True, "Rebuild the pretraining learning "
                                  "check section of bench/README.md.")

SECTION = "pretraining_learning_check"


def _split_documents(corpus, train_path, heldout_path, fraction):
  with open(corpus, encoding="utf-8") as f:
    docs = [d.strip() for d in f.read().split("\n\n") if d.strip()]
  every = max(int(round(1 / fraction)), 2)
  heldout = [d for i, d in enumerate(docs) if i % every == 0]
  train = [d for i, d in enumerate(docs) if i % every != 0]
  for path, part in ((train_path, train), (heldout_path, heldout)):
    with open(path, "w", encoding="utf-8") as f:
      f.write("\n\n".join(part) + "\n")
  return len(train), len(heldout)


def _load_average() -> str:
  return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def _markdown(curve, base, settings, seconds, load, command) -> str:
  rows = [(step, f"{m['masked_lm_accuracy']:.4f}", f"{m['masked_lm_perplexity']:.1f}",
           f"{m['next_sentence_accuracy']:.4f}") for step, m in curve]
  final = curve[-1][1]
  return "\n".join([
      f"BERT-{settings['size']} from random weights, batch {settings['batch_size']}, seq "
      f"{settings['seq_length']}, {settings['max_predictions_per_seq']} predictions, AdamW "
      f"lr {settings['learning_rate']:g} (10% warm-up, linear decay), "
      f"{settings['train_steps']} steps; {settings['train_instances']:,} training instances "
      f"({settings['train_documents']} documents, dupe factor {settings['dupe_factor']}), "
      f"{settings['heldout_instances']:,} held-out instances ({settings['heldout_documents']} "
      f"other documents). {seconds / 60:.0f} min of training and evaluation on "
      f"{common.machine_description()} (load average at the end {load}).",
      "",
      common.markdown_table(("step", "held-out masked-LM accuracy", "perplexity",
                             "next-sentence accuracy"), rows),
      "",
      f"Input-blind baselines on the same held-out instances: unigram masked-LM accuracy "
      f"{base.unigram_masked_lm_accuracy:.4f} (always token id {base.unigram_token_id}, "
      f"the most often masked training token); next-sentence majority "
      f"{base.majority_next_sentence_accuracy:.4f}. Final: masked-LM "
      f"{final['masked_lm_accuracy']:.4f} "
      f"({final['masked_lm_accuracy'] / base.unigram_masked_lm_accuracy:.1f}x the unigram "
      f"baseline), next sentence {final['next_sentence_accuracy']:.4f}.",
      "",
      f"`{command}`",
  ])


def main(argv):
  del argv
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  from bert_tf.data import baselines  # pylint: disable=g-import-not-at-top
  from bert_tf.data import create_pretraining_data as cpd  # pylint: disable=g-import-not-at-top
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  from bert_tf.training import strategies  # pylint: disable=g-import-not-at-top
  from bert_tf.training.trainer import Trainer  # pylint: disable=g-import-not-at-top

  out = _OUTPUT.value
  os.makedirs(out, exist_ok=True)
  train_txt, heldout_txt = os.path.join(out, "train.txt"), os.path.join(out, "heldout.txt")
  n_train, n_heldout = _split_documents(_CORPUS.value, train_txt, heldout_txt, _HELDOUT.value)
  print(f"documents: {n_train} train, {n_heldout} held out", flush=True)
  settings = dict(max_seq_length=_SEQ.value, max_predictions_per_seq=_PREDICTIONS.value)
  train_prefix, heldout_prefix = os.path.join(out, "train"), os.path.join(out, "heldout")
  start = time.time()
  cpd.create_pretraining_data(train_txt, _VOCAB.value, train_prefix,
                              cpd.PretrainingDataSettings(dupe_factor=_DUPE.value, **settings),
                              overwrite=True, progress=False)
  cpd.create_pretraining_data(heldout_txt, _VOCAB.value, heldout_prefix,
                              cpd.PretrainingDataSettings(dupe_factor=1, random_seed=7,
                                                          **settings),
                              overwrite=True, progress=False)
  train_glob = cpd.output_paths(train_prefix, 1, False)[0]
  heldout_glob = cpd.output_paths(heldout_prefix, 1, False)[0]
  print(f"pretraining data created in {time.time() - start:.0f}s", flush=True)

  base = baselines.input_blind_baselines(train_glob, heldout_glob)
  train_instances = sum(baselines.count_labels(train_glob).next_sentence_labels.values())
  heldout_instances = sum(baselines.count_labels(heldout_glob).next_sentence_labels.values())
  print(f"train instances: {train_instances}, held-out instances: {heldout_instances}; "
        f"load {_load_average()}", flush=True)

  with open(_VOCAB.value, encoding="utf-8") as f:
    vocab_size = sum(1 for _ in f)
  data = dict(format="tfrecord", global_batch_size=_BATCH.value, seq_length=_SEQ.value,
              max_predictions_per_seq=_PREDICTIONS.value)
  encoder = configs.EncoderConfig.from_size(_SIZE.value, vocab_size=vocab_size).as_dict()
  experiment = experiments.experiment_from_dict(dict(
      model=dict(encoder=encoder),
      train_data=dict(data, input_path=train_glob),
      eval_data=dict(data, input_path=heldout_glob, is_training=False,
                     drop_remainder=False),
      optimizer=dict(type="adamw", learning_rate=_LR.value,
                     warmup_steps=max(_STEPS.value // 10, 1)),
      trainer=dict(train_steps=_STEPS.value, steps_per_loop=min(50, _EVAL_EVERY.value),
                   summary_interval=_EVAL_EVERY.value,
                   log_interval=min(50, _EVAL_EVERY.value),
                   checkpoint_interval=_STEPS.value, validation_interval=_EVAL_EVERY.value),
      runtime=dict(distribution_strategy=_STRATEGY.value)))
  strategies.configure_runtime(experiment.runtime)
  trainer = Trainer(experiment, os.path.join(out, "model"),
                    log_fn=lambda line: print(line, flush=True))
  start = time.time()
  curve = [(0, trainer.evaluate())]
  for step in range(_EVAL_EVERY.value, _STEPS.value + 1, _EVAL_EVERY.value):
    trainer.train(train_steps=step)
    metrics = trainer.evaluate()
    curve.append((step, metrics))
  seconds = time.time() - start

  command = common.command_line()
  print("\nCommand: " + command)
  print(f"BERT-{_SIZE.value}, batch {_BATCH.value}, seq {_SEQ.value}, {_STEPS.value} steps, "
        f"{seconds / 60:.1f} min training+eval")
  print("| step | held-out masked-LM accuracy | perplexity | next-sentence accuracy |")
  print("| ---: | ---: | ---: | ---: |")
  for step, m in curve:
    print(f"| {step} | {m['masked_lm_accuracy']:.4f} | {m['masked_lm_perplexity']:.1f} | "
          f"{m['next_sentence_accuracy']:.4f} |")
  final = curve[-1][1]
  print(f"unigram baseline masked-LM accuracy: {base.unigram_masked_lm_accuracy:.4f} "
        f"(always the most frequent masked token, id {base.unigram_token_id}); final "
        f"{final['masked_lm_accuracy']:.4f}")
  print(f"next-sentence majority baseline: {base.majority_next_sentence_accuracy:.4f}; final "
        f"{final['next_sentence_accuracy']:.4f}")
  load = _load_average()
  settings = dict(size=_SIZE.value, batch_size=_BATCH.value, seq_length=_SEQ.value,
                  max_predictions_per_seq=_PREDICTIONS.value, learning_rate=_LR.value,
                  train_steps=_STEPS.value, dupe_factor=_DUPE.value,
                  train_documents=n_train, heldout_documents=n_heldout,
                  train_instances=train_instances, heldout_instances=heldout_instances)
  path = common.write_results(SECTION, {
      "settings": settings, "seconds": seconds, "load": load, "command": command,
      "curve": [{"step": step, **m} for step, m in curve],
      "baselines": {"unigram_masked_lm_accuracy": base.unigram_masked_lm_accuracy,
                    "unigram_token_id": base.unigram_token_id,
                    "majority_next_sentence_accuracy": base.majority_next_sentence_accuracy,
                    "majority_next_sentence_label": base.majority_next_sentence_label},
  })
  print(f"Wrote {path}")
  if _WRITE_README.value:
    common.update_readme_section(SECTION, _markdown(curve, base, settings, seconds, load,
                                                    command))
    print(f"Updated the '{SECTION}' section of {common.README}")


if __name__ == "__main__":
  flags.mark_flags_as_required(["corpus", "vocab_file", "output_dir"])
  app.run(main)
