"""Tagging sentences longer than seq_length: evaluation and the export read them in the same
windows, label every word once, and agree word for word."""

import numpy as np
import keras
import tensorflow as tf

import finetuning_helpers as helpers
from bert_tf.data.task_files import conll
from bert_tf.export import exporter
from bert_tf.export import tagging_serving as ts
from bert_tf.metrics import tagging as tagging_metrics
from bert_tf.training import evaluation
from bert_tf.training.trainer import Trainer

LABELS = ["O", "B-COL", "I-COL"]
SEQ_LENGTH = 16
WINDOW_STRIDE = 5
COLORS = ("red", "blue", "green")
OTHER = ("the", "dog", "man", "home", "mat", "playing", "paris", "walks", ",", ".")


def _conll_file(path, rng, n):
  """Sentences of 3 to 40 words (up to ~60 pieces); runs of colors are one entity."""
  lines = []
  for _ in range(n):
    previous = "O"
    for _ in range(rng.integers(3, 41)):
      if rng.random() < 0.3:
        word = str(rng.choice(COLORS))
        tag = "I-COL" if previous != "O" else "B-COL"
      else:
        word, tag = str(rng.choice(OTHER)), "O"
      lines.append(f"{word} {tag}")
      previous = tag
    lines.append("")
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return str(path)


def test_long_sentences_every_word_tagged_once_and_served_as_evaluated(tmp_path):
  keras.utils.set_random_seed(0)
  rng = np.random.default_rng(0)
  vocab = helpers.write_vocab(tmp_path / "vocab.txt")
  dev = _conll_file(tmp_path / "dev.txt", rng, 16)
  data = dict(format="conll", input_path=dev)
  experiment = helpers.tiny_experiment(
      {"name": "tagging", "label_names": LABELS, "window_stride": WINDOW_STRIDE}, data, data,
      seq_length=SEQ_LENGTH, vocab_file=vocab,
      vocab_size=len(helpers.vocab_ids(vocab)))
  sentences = conll.read_conll(dev)
  assert sum(len(s.words) > SEQ_LENGTH for s in sentences) >= 8
  # An untrained tagger: its tags vary from word to word, so entities begin and end
  # everywhere, near window edges too.
  trainer = Trainer(experiment, str(tmp_path / "model"))
  seen = {}
  reduce_eval = trainer.task.reduce_eval
  trainer.task.reduce_eval = lambda values: reduce_eval(seen.setdefault("values", values))
  metrics = trainer.evaluate()

  # The in-loop metric scored every word and every gold entity of the file.
  indices, gold, predicted = trainer.task.word_tags(seen["values"])
  assert indices == list(range(len(sentences)))
  assert gold == [s.tags for s in sentences]
  file_entities = sum(len(tagging_metrics.extract_entities(s.tags)) for s in sentences)
  assert sum(len(tagging_metrics.extract_entities(g)) for g in gold) == file_entities
  assert metrics == tagging_metrics.conll_precision_recall_f1(gold, predicted)

  # The predictions file holds a prediction for every word: the in-loop ones.
  path = f"{evaluation.predictions_dir(trainer.model_dir, 0)}/tagging_predictions.txt"
  with open(path, encoding="utf-8") as f:
    blocks = f.read().strip("\n").split("\n\n")
  rows = [[line.split(" ") for line in block.split("\n")] for block in blocks]
  assert [[r[0] for r in s] for s in rows] == [s.words for s in sentences]
  file_predictions = [[r[2] for r in s] for s in rows]
  assert file_predictions == predicted
  assert 0 < sum(len(tagging_metrics.extract_entities(p)) for p in predicted)

  # The served entities of each sentence's text are the predictions file's.
  module = exporter.build_serving_module(experiment, trainer.model, vocab)
  texts = [" ".join(s.words) for s in sentences]
  out = module.predict_text({"text": tf.constant(texts)})
  for i, (sentence, tags) in enumerate(zip(sentences, file_predictions)):
    starts = np.cumsum([0] + [len(w) + 1 for w in sentence.words])
    expected = [(e.type, int(starts[e.start]), int(starts[e.end] - 1),
                 " ".join(sentence.words[e.start:e.end]))
                for e in tagging_metrics.extract_entities(tags)]
    count = int(out[ts.ENTITY_COUNT][i])
    served = [(out[ts.ENTITY_TYPES][i, e].numpy().decode(), int(out[ts.ENTITY_START][i, e]),
               int(out[ts.ENTITY_END][i, e]), out[ts.ENTITY_TEXT][i, e].numpy().decode())
              for e in range(count)]
    assert served == expected, f"sentence {i}"
  assert max(out[ts.NUM_WINDOWS].numpy()) > 3
