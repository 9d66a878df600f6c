"""Run folders of tiny models for the inference tests: each a model_dir as a training
leaves it (params.yaml naming its vocab.txt, a portable ckpt-N.h5), and the texts they
are asked."""

import os

from bert_tf.checkpoints import portable
from bert_tf.configs import run_folder
from bert_tf.training import params_file

import checkpoint_helpers
import export_helpers

# Rows of each run's inputs, of several lengths (one cut by truncation), [MASK]s and
# unknown words included.
PAIRS = [("the cat sat on the mat .", "a dog ran in the park ."),
         ("hello world", "what is good ?"),
         ("", "paris is the capital of france"),
         ("who visited london ? " * 6, "john lives in paris"),
         ("Héllo, Wörld! unbelievable", "mary visited the city")]
MASKED = ["the [MASK] sat on the mat .", "hello [MASK] world , the [MASK] .", "no marks",
          "[MASK]" * 5, "paris is the [MASK] of france " * 4]
SQUAD = [("who lives in paris ?", "john lives in paris . mary visited london ."),
         ("what is the capital of france ?", "paris is the capital of france .")]


def write_run(directory, family: str, seed: int = 7):
  """A run folder of `family` (export_helpers.TASK_SECTIONS) holding a model of random
  weights of a useful scale; returns (its path, the model)."""
  os.makedirs(directory, exist_ok=True)
  vocab = export_helpers.write_vocab(directory)
  experiment = export_helpers.experiment(vocab, export_helpers.TASK_SECTIONS[family])
  model = export_helpers.build_model(experiment, seed=seed)
  checkpoint_helpers.randomize(model, seed)
  experiment = experiment.override({"tokenizer": {"vocab_file": run_folder.VOCAB_FILE}})
  params_file.save(experiment, str(directory))
  portable.save(portable.path_for_step(str(directory), 3), model.trained_items, step=3)
  return str(directory), model

