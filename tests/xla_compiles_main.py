"""Counts the XLA compilations of the trainer's forward/backward over a jit-compiled
fine-tuning run whose batches vary in length.

A process of its own, as XLA reads its dump flags once per process:

  python tests/xla_compiles_main.py WORK_DIR OUTPUT_JSON

writes {"compilations": N, "lengths": [...]} to OUTPUT_JSON: N the modules XLA compiled
for the forward/backward, `lengths` those of the batches the task's input yields before
the trainer pads them. Tests import `sentence_prediction_experiment` from here.
"""

import json
import os
import sys

import numpy as np

SEQ_LENGTH = 16
LENGTH_BUCKETS = [8, 12]
STEPS = 12


def sentence_prediction_experiment(work_dir: str, jit_compile: bool, steps: int = STEPS):
  """A sentence_prediction experiment on a TSV of 3 to 12 words a sentence, batches by
  length bucket (LENGTH_BUCKETS, seq_length SEQ_LENGTH), the reference layers."""
  import finetuning_helpers  # pylint: disable=g-import-not-at-top
  vocab = finetuning_helpers.write_vocab(os.path.join(work_dir, "vocab.txt"))
  rng = np.random.default_rng(0)
  words = ["red", "blue", "green", "dog", "man", "home", "mat", "the", "cat"]
  lines = ["sentence\tlabel"] + [
      f"{' '.join(rng.choice(words, size=rng.integers(3, 13)))}\t{i % 2}" for i in range(64)]
  path = os.path.join(work_dir, "train.tsv")
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  data = dict(format="tsv", vocab_file=vocab, input_path=path, length_buckets=LENGTH_BUCKETS)
  experiment = finetuning_helpers.tiny_experiment(
      {"name": "sentence_prediction", "text_a_column": "sentence", "num_classes": 2},
      data, steps=steps, seq_length=SEQ_LENGTH)
  return experiment.override({
      "train_data": {"global_batch_size": 4},
      "trainer": {"steps_per_loop": 4, "checkpoint_interval": steps},
      "runtime": {"jit_compile": jit_compile, "fused_kernels": False}})


def main():
  work_dir, output = sys.argv[1:3]
  dump_dir = os.path.join(work_dir, "xla_dump")
  os.environ["XLA_FLAGS"] = f"--xla_dump_to={dump_dir}"
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import constants  # pylint: disable=g-import-not-at-top
  from bert_tf.training.trainer import Trainer  # pylint: disable=g-import-not-at-top

  experiment = sentence_prediction_experiment(work_dir, jit_compile=True)
  trainer = Trainer(experiment, os.path.join(work_dir, "model"), log_fn=lambda _: None)
  context = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                       num_replicas_in_sync=1)
  batches = trainer.task.data_loader(experiment.train_data).dataset(context).take(STEPS)
  lengths = sorted({int(b[constants.INPUT_WORD_IDS].shape[-1]) for b in batches})
  trainer.train()
  modules = {name.split(".")[0] for name in os.listdir(dump_dir)
             if "forward_backward" in name and name.endswith(".before_optimizations.txt")}
  with open(output, "w", encoding="utf-8") as f:
    json.dump({"compilations": len(modules), "lengths": lengths}, f)


if __name__ == "__main__":
  main()
