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
# Contexts over several windows (LONG_SQUAD's doc_stride), an empty one, accents.
LONG_SQUAD = SQUAD + [
    ("who visited london ?", "john lives in paris . mary visited london . " * 5),
    ("where does mary live ?", ""),
    ("Whó lives in Pàris?", "Jöhn lives in Pàris, the capital of France; unbelievable!")]
# Texts over several windows (LONG_TAGGING's window_stride), empty, with unknown words.
TAGGED = ["john lives in paris", "mary visited london with john and mary", "", "the cat",
          "john and mary visited paris . " * 5, "Jöhn   visited\tLondon, xyz !"]
# A context and three endings per row.
CHOICES = [("the cat sat on the mat .", "a dog ran .", "the cat ran in the park .", ""),
           ("john lives in paris .", "mary visited london . " * 6, "he is good .", "what ?")]
# Task settings that cut the rows above into several windows, and a SQuAD 2.0 null rule.
LONG_SQUAD_TASK = {"doc_stride": 5, "version_2_with_negative": True}
LONG_TAGGING_TASK = {"window_stride": 4, "label_names": ["O", "B-PER", "I-PER", "LOC"]}


def write_run(directory, family: str, seed: int = 7, **task_settings):
  """A run folder of `family` (export_helpers.TASK_SECTIONS, or a task's name) with
  `task_settings` in its task section, holding a model of random weights of a useful
  scale; returns (its path, the model)."""
  os.makedirs(directory, exist_ok=True)
  vocab = export_helpers.write_vocab(directory)
  section = export_helpers.TASK_SECTIONS.get(family, {"name": family})
  experiment = export_helpers.experiment(vocab, {**section, **task_settings})
  model = export_helpers.build_model(experiment, seed=seed)
  checkpoint_helpers.randomize(model, seed)
  experiment = experiment.override({"tokenizer": {"vocab_file": run_folder.VOCAB_FILE}})
  params_file.save(experiment, str(directory))
  portable.save(portable.path_for_step(str(directory), 3), model.trained_items, step=3)
  return str(directory), model

