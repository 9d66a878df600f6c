"""The tagging task: loss on first pieces, conlleval metrics, predictions, training."""

import numpy as np
import pytest
import tensorflow as tf

import finetuning_helpers as helpers
from bert_tf import constants
from bert_tf.models.bert_classifier import LOGITS
from bert_tf.tasks import base
from bert_tf.training.trainer import Trainer

LABELS = ["O", "B-COL", "I-COL"]


def _task(**data):
  experiment = helpers.tiny_experiment({"name": "tagging", "label_names": LABELS},
                                       dict({"format": "dummy"}, **data))
  return base.get_task(experiment)


def test_loss_ignores_pieces_that_are_not_a_words_first():
  task = _task()
  logits = tf.math.log(tf.constant([[[0.5, 0.25, 0.25], [1 / 3, 1 / 3, 1 / 3],
                                     [0.25, 0.5, 0.25]]]))
  features = {constants.LABEL_IDS: tf.constant([[0, constants.IGNORE_LABEL, 1]])}
  loss = task.compute_loss(features, {LOGITS: logits}, global_batch_size=2)["loss"]
  # Mean over the two scored pieces of -log(0.5), then divided by the global batch of 2.
  assert float(loss) == pytest.approx(np.log(2.0) / 2, rel=1e-5)


def test_eval_maps_predictions_back_to_words_and_scores_entities(tmp_path):
  task = _task()
  ignore = constants.IGNORE_LABEL
  values = {
      constants.LABEL_IDS: np.array([[ignore, 1, ignore, 0, 1, 2, ignore]]),
      "predictions": np.array([[0, 1, 0, 0, 1, 0, 0]]),
      constants.EXAMPLE_INDEX: np.array([0]),
      constants.WINDOW_INDEX: np.array([0]),
  }
  metrics = task.reduce_eval(values)
  # Gold entities: [0,1) and [2,4); predicted: [0,1) and [2,3).
  assert metrics["precision"] == pytest.approx(0.5) and metrics["recall"] == pytest.approx(0.5)
  conll_file = tmp_path / "dev.txt"
  conll_file.write_text("red B-COL\nthe O\nblue B-COL\ngreen I-COL\ncut O\n")
  experiment = task.experiment.override({"eval_data": {"format": "conll",
                                                       "input_path": str(conll_file)}})
  path = base.get_task(experiment).write_predictions(values, str(tmp_path))
  assert open(path).read().splitlines() == ["red B-COL B-COL", "the O O", "blue B-COL B-COL",
                                            "green I-COL O", "cut O O", ""]


def test_eval_joins_the_windows_of_a_sentence_in_window_order_whatever_the_row_order():
  task = _task()
  ignore = constants.IGNORE_LABEL
  # Sentence 0 in two windows (rows 2 and 0), sentence 1 in one (row 1).
  values = {
      constants.LABEL_IDS: np.array([[ignore, 1, 2, ignore], [ignore, 1, ignore, ignore],
                                     [ignore, 0, 1, ignore]]),
      "predictions": np.array([[0, 1, 2, 0], [0, 1, 0, 0], [0, 0, 1, 0]]),
      constants.EXAMPLE_INDEX: np.array([0, 1, 0]),
      constants.WINDOW_INDEX: np.array([1, 0, 0]),
  }
  indices, gold, predicted = task.word_tags(values)
  assert indices == [0, 1]
  assert gold == [["O", "B-COL", "B-COL", "I-COL"], ["B-COL"]]
  assert predicted == gold


def test_eval_outputs_are_padded_to_eval_seq_length():
  task = _task()
  features = {constants.LABEL_IDS: tf.zeros([2, 5], tf.int32),
              constants.EXAMPLE_INDEX: tf.range(2), constants.WINDOW_INDEX: tf.zeros([2], tf.int32)}
  outputs = task.eval_outputs(features, {LOGITS: tf.zeros([2, 5, 3])})
  assert outputs["predictions"].shape == (2, 16)
  assert int(tf.reduce_sum(tf.cast(outputs[constants.LABEL_IDS] == constants.IGNORE_LABEL, tf.int32))) == 22


def test_one_training_step_on_dummy_input_updates_the_tagger(tmp_path):
  experiment = helpers.tiny_experiment({"name": "tagging", "label_names": LABELS},
                                       {"format": "dummy"})
  trainer = Trainer(experiment, str(tmp_path))
  before = [v.numpy().copy() for v in trainer.model.tagger.weights]
  report = trainer.train()
  assert np.isfinite(report["loss"])
  assert all(not np.allclose(a, v.numpy()) for a, v in zip(before, trainer.model.tagger.weights))


def _synthetic_conll(path, rng, n):
  """Sentences of 3-7 words; every color word is an entity of its own."""
  words = ["red", "blue", "green", "dog", "man", "home", "mat", "the", "playing"]
  lines = []
  for _ in range(n):
    for word in rng.choice(words, size=rng.integers(3, 8)):
      lines.append(f"{word} {'B-COL' if word in ('red', 'blue', 'green') else 'O'}")
    lines.append("")
  path.write_text("\n".join(lines) + "\n")
  return str(path)


@pytest.mark.slow  # a learning run
def test_learns_to_tag_a_word_set(tmp_path):
  metrics, predictions = helpers.learn_synthetic_task(
      tmp_path, {"name": "tagging", "label_names": LABELS}, "conll", _synthetic_conll,
      ("train.txt", "dev.txt"), 40, "tagging_predictions.txt")
  assert metrics["f1"] > 0.9
  # The evaluation also wrote "word gold predicted" lines, a blank line after each sentence.
  sentences = predictions.strip("\n").split("\n\n")
  assert len(sentences) == 64
  assert all(len(line.split(" ")) == 3 for s in sentences for line in s.split("\n"))
