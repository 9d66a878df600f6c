"""Shared fixtures of the fine-tuning tests: a tiny WordPiece vocab, tiny experiments, and
a tiny model trained on synthetic task files."""

import os
import string
from typing import Callable, Optional, Tuple

import keras
import numpy as np

from bert_tf import configs
from bert_tf import constants
from bert_tf.training import evaluation
from bert_tf.training import experiments
from bert_tf.training.trainer import Trainer

WORDS = ("the", "cat", "dog", "sat", "on", "mat", "good", "bad", "movie", "john", "lives",
         "in", "paris", "play", "##ing", "##ians", "a", "man", "walks", "runs", "home",
         "red", "blue", "green", "yes", "no")


def write_vocab(path) -> str:
  """A vocab of the special tokens, WORDS, letters, ##letters and punctuation, filled up
  to the 100 rows of tiny_experiment's table by a token no text holds."""
  letters = list(string.ascii_lowercase)
  tokens = (list(constants.SPECIAL_TOKENS) + list(WORDS) + letters + ["##" + c for c in letters]
            + list(".,!?'\"-") + [str(d) for d in range(10)])
  seen = []
  for t in tokens:
    if t not in seen:
      seen.append(t)
  seen += [f"[unused{i}]" for i in range(100 - len(seen))]
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(seen) + "\n")
  return str(path)


def vocab_ids(path):
  with open(path, encoding="utf-8") as f:
    return {line.rstrip("\n"): i for i, line in enumerate(f)}


def tiny_experiment(task: dict, train_data: dict, eval_data: dict = None, steps: int = 1,
                    learning_rate: float = 1e-3, vocab_size: int = 100,
                    seq_length: int = 16, vocab_file: str = "") -> configs.ExperimentConfig:
  """A 2-layer, hidden-32 experiment for quick training runs, tokenizing with vocab_file."""
  train = dict(seq_length=seq_length, global_batch_size=8, **train_data)
  evaluation = dict(seq_length=seq_length, global_batch_size=8, is_training=False,
                    drop_remainder=False, **(eval_data or train_data))
  return experiments.experiment_from_dict({
      "task": task,
      "model": {"encoder": {"vocab_size": vocab_size, "hidden_size": 32, "num_layers": 2,
                            "num_attention_heads": 2, "intermediate_size": 64,
                            "max_position_embeddings": 64, "dropout_rate": 0.0,
                            "attention_dropout_rate": 0.0},
                "head_dropout_rate": 0.0},
      "tokenizer": {"vocab_file": vocab_file},
      "train_data": train,
      "eval_data": evaluation,
      "optimizer": {"learning_rate": learning_rate, "warmup_steps": 0,
                    "weight_decay_rate": 0.0},
      "trainer": {"train_steps": steps, "steps_per_loop": max(1, min(steps, 50)),
                  "summary_interval": steps, "checkpoint_interval": steps,
                  "log_interval": steps, "validation_interval": steps},
  })


def learn_synthetic_task(tmp_path, task: dict, data_format: str,
                         write_file: Callable[[str, np.random.Generator, int], str],
                         file_names: Tuple[str, str], steps: int, predictions_file: str,
                         configure: Optional[Callable] = None) -> Tuple[dict, str]:
  """Trains a tiny `task` experiment for `steps` on synthetic files and evaluates it.

  Args:
    write_file: write_file(path, rng, n) writes n synthetic examples in `data_format`
      and returns the path: 256 for training, 64 for evaluation.
    file_names: the training and evaluation files' names under tmp_path.
    predictions_file: the name of the file of predictions the evaluation writes.
    configure: changes the experiment before training (the experiment -> another).

  Returns:
    (the evaluation metrics, the text of the predictions file).
  """
  keras.utils.set_random_seed(0)
  rng = np.random.default_rng(0)
  vocab = write_vocab(tmp_path / "vocab.txt")
  train_name, eval_name = file_names
  experiment = tiny_experiment(
      task, {"format": data_format, "input_path": write_file(tmp_path / train_name, rng, 256)},
      {"format": data_format, "input_path": write_file(tmp_path / eval_name, rng, 64)},
      steps=steps, learning_rate=3e-3, vocab_file=vocab)
  if configure is not None:
    experiment = configure(experiment)
  trainer = Trainer(experiment, str(tmp_path / "model"))
  trainer.train()
  metrics = trainer.evaluate()
  with open(os.path.join(evaluation.predictions_dir(trainer.model_dir, steps), predictions_file),
            encoding="utf-8") as f:
    return metrics, f.read()


def padded_batches(ds, kind: str, batch_size: int, drop_remainder: bool):
  """Featurized examples batched by tf.data's padded_batch with the package's padding
  values (the record kind's token_fills, 0 for the other features): each batch padded
  to its longest example, a reference the package's own inputs are checked against."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.data.pipelines import loaders  # pylint: disable=g-import-not-at-top
  fills = loaders.get_kind(kind).token_fills(loaders.InputNeeds(task="", record_kind=kind),
                                             configs.DataConfig())
  values = {k: tf.constant(fills.get(k, 0), spec.dtype) for k, spec in ds.element_spec.items()}
  return ds.padded_batch(batch_size, padding_values=values, drop_remainder=drop_remainder)
