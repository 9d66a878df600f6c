"""The sentence_prediction task: config, loss, metrics, predictions, training."""

import numpy as np
import pytest
import tensorflow as tf

import finetuning_helpers as helpers
from bert_tf import configs
from bert_tf import constants
from bert_tf.models.bert_classifier import LOGITS
from bert_tf.tasks import base
from bert_tf.training.trainer import Trainer


def _task(**task):
  experiment = helpers.tiny_experiment(dict(name="sentence_prediction", **task),
                                       {"format": "dummy"})
  return base.get_task(experiment)


def test_glue_task_sets_classes_labels_and_metric():
  stsb = _task(glue_task="stsb")
  assert (stsb.num_classes, stsb.metric, stsb.score_range) == (1, "pearson_spearman", (0., 5.))
  mnli = _task(glue_task="mnli")
  assert mnli.label_names == ("contradiction", "entailment", "neutral")
  assert _task(glue_task="cola").metric == "matthews_corrcoef"
  generic = _task(num_classes=3)
  assert generic.label_names == ("0", "1", "2") and generic.metric == "accuracy"


def test_impossible_task_settings_are_config_errors():
  with pytest.raises(configs.ConfigError, match="glue_task"):
    _task(glue_task="sst5")
  with pytest.raises(configs.ConfigError, match="does not fit"):
    _task(num_classes=1, metric="accuracy")
  with pytest.raises(configs.ConfigError, match="label_names has 2 names"):
    _task(num_classes=3, label_names=["a", "b"])


def test_regression_loss_is_squared_error_over_global_batch():
  task = _task(glue_task="stsb")
  features = {constants.LABEL_IDS: tf.constant([1.0, 3.0])}
  outputs = {LOGITS: tf.constant([[2.0], [3.0]])}
  loss = task.compute_loss(features, outputs, global_batch_size=4)["loss"]
  assert float(loss) == pytest.approx((1.0 + 0.0) / 4)


def test_classification_loss_is_cross_entropy_over_global_batch():
  task = _task(num_classes=2)
  features = {constants.LABEL_IDS: tf.constant([0, 1])}
  outputs = {LOGITS: tf.constant([[0.0, 0.0], [0.0, np.log(3.0)]])}
  loss = task.compute_loss(features, outputs, global_batch_size=2)["loss"]
  assert float(loss) == pytest.approx((np.log(2.0) + np.log(4 / 3)) / 2, rel=1e-5)


def test_eval_reduces_to_the_glue_metric_and_predictions_use_label_names(tmp_path):
  task = _task(glue_task="mrpc")
  values = {"predictions": np.array([1, 0, 1]), constants.LABEL_IDS: np.array([1, 1, 1]),
            constants.EXAMPLE_INDEX: np.array([5, 3, 4])}
  metrics = task.reduce_eval(values)
  assert metrics["accuracy"] == pytest.approx(2 / 3) and metrics["f1"] == pytest.approx(0.8)
  path = task.write_predictions(values, str(tmp_path))
  assert open(path).read().splitlines() == ["index\tprediction", "3\t0", "4\t1", "5\t1"]


def _first_batch_accuracy(trainer):
  """Accuracy of the untrained model on the first training batch: what one step reports."""
  batch = next(iter(trainer.task.data_loader(trainer.experiment.train_data).dataset()))
  logits = trainer.model(trainer.task.model_inputs(batch), training=False)[LOGITS]
  return float(np.mean(np.argmax(logits, axis=-1) == np.asarray(batch[constants.LABEL_IDS])))


def test_one_training_step_on_dummy_input_updates_the_head(tmp_path):
  experiment = helpers.tiny_experiment({"name": "sentence_prediction", "num_classes": 3},
                                       {"format": "dummy"})
  trainer = Trainer(experiment, str(tmp_path))
  before = [v.numpy().copy() for v in trainer.model.classifier.weights]
  expected_accuracy = _first_batch_accuracy(trainer)
  report = trainer.train()
  after = [v.numpy() for v in trainer.model.classifier.weights]
  assert np.isfinite(report["loss"])
  assert report["accuracy"] == pytest.approx(expected_accuracy)
  assert all(not np.allclose(a, b) for a, b in zip(before, after))


def _synthetic_tsv(path, rng, n):
  """Sentences of 3-6 color/animal words; label 1 when "cat" occurs."""
  words = ["red", "blue", "green", "dog", "man", "home", "mat", "the"]
  lines = ["sentence\tlabel"]
  for i in range(n):
    sentence = list(rng.choice(words, size=rng.integers(3, 7)))
    label = i % 2
    if label:
      sentence[rng.integers(len(sentence))] = "cat"
    lines.append(f"{' '.join(sentence)}\t{label}")
  path.write_text("\n".join(lines) + "\n")
  return str(path)


@pytest.mark.slow  # a learning run
def test_learns_whether_a_sentence_contains_a_token(tmp_path):
  metrics, predictions = helpers.learn_synthetic_task(
      tmp_path, {"name": "sentence_prediction", "text_a_column": "sentence",
                 "num_classes": 2}, "tsv", _synthetic_tsv, ("train.tsv", "dev.tsv"), 60,
      "sentence_prediction_predictions.tsv")
  assert metrics["accuracy"] > 0.9
  # The evaluation also wrote GLUE-style predictions: a header, then one row per example.
  rows = predictions.splitlines()
  assert rows[0] == "index\tprediction" and len(rows) == 65
  assert [row.split("\t")[0] for row in rows[1:]] == [str(i) for i in range(64)]


def test_evaluation_of_batches_of_many_lengths_does_not_trace_once_per_length(tmp_path):
  # Dev batches are padded to their longest sentence, 2..11 pieces here: ten lengths.
  vocab = helpers.write_vocab(tmp_path / "vocab.txt")
  lines = ["sentence\tlabel"] + [f"{' '.join(['red'] * n)}\t{n % 2}" for n in range(1, 11)]
  (tmp_path / "dev.tsv").write_text("\n".join(lines) + "\n")
  data = dict(format="tsv", input_path=str(tmp_path / "dev.tsv"))
  experiment = helpers.tiny_experiment(
      {"name": "sentence_prediction", "text_a_column": "sentence", "num_classes": 2},
      data, vocab_file=vocab).override({"eval_data": {"global_batch_size": 1}})
  trainer = Trainer(experiment, str(tmp_path / "model"), log_fn=lambda _: None)
  trainer.evaluate()
  assert trainer.engine.eval_step_function.experimental_get_tracing_count() <= 2


def test_init_checkpoint_restores_the_encoder_and_leaves_the_head(tmp_path):
  source = _task().build_model()
  prefix = tf.train.Checkpoint(encoder=source.encoder).save(str(tmp_path / "ckpt"))
  experiment = helpers.tiny_experiment(
      {"name": "sentence_prediction", "num_classes": 2, "init_checkpoint": prefix},
      {"format": "dummy"})
  task = base.get_task(experiment)
  model = task.build_model()
  head_before = [v.numpy().copy() for v in model.classifier.weights]
  assert task.initialize(model) == {"encoder": prefix}
  for restored, original in zip(model.encoder.weights, source.encoder.weights):
    np.testing.assert_array_equal(restored.numpy(), original.numpy())
  for after, before in zip(model.classifier.weights, head_before):
    np.testing.assert_array_equal(after.numpy(), before)


def test_length_buckets_batch_sentences_of_one_bucket_padded_to_their_longest(tmp_path):
  # Sentences of 1..12 words: 3..14 pieces with [CLS] and [SEP]; buckets end at 6 and 10.
  vocab = helpers.write_vocab(tmp_path / "vocab.txt")
  lines = ["sentence\tlabel"] + [f"{' '.join(['red'] * (i % 12 + 1))}\t{i % 2}"
                                 for i in range(96)]
  (tmp_path / "train.tsv").write_text("\n".join(lines) + "\n")
  data = dict(format="tsv", input_path=str(tmp_path / "train.tsv"),
              length_buckets=[6, 10, 32])  # 32 >= seq_length (16): ignored.
  task = base.get_task(helpers.tiny_experiment(
      {"name": "sentence_prediction", "text_a_column": "sentence", "num_classes": 2}, data,
      vocab_file=vocab))
  assert task.experiment.train_data.active_length_buckets() == [6, 10]
  buckets_seen = set()
  for batch in task.data_loader(task.experiment.train_data).dataset().take(24):
    lengths = batch[constants.INPUT_MASK].numpy().sum(axis=1)
    bucket = {0 if n <= 6 else 1 if n <= 10 else 2 for n in lengths}
    assert len(bucket) == 1, lengths
    buckets_seen |= bucket
    assert batch[constants.INPUT_WORD_IDS].shape == (8, lengths.max())
  assert buckets_seen == {0, 1, 2}


def test_length_buckets_must_increase():
  with pytest.raises(configs.ConfigError, match="length_buckets"):
    configs.DataConfig(length_buckets=[32, 16]).validate()


def _packing_experiment(tmp_path, **train_data):
  vocab = helpers.write_vocab(tmp_path / "vocab.txt")
  rng = np.random.default_rng(0)
  data = dict(format="tsv", input_path=_synthetic_tsv(tmp_path / "train.tsv", rng, 32))
  return helpers.tiny_experiment(
      {"name": "sentence_prediction", "text_a_column": "sentence", "num_classes": 2},
      dict(data, **train_data), dict(data), vocab_file=vocab)


def test_packed_batches_give_each_example_its_unpacked_logits_and_loss(tmp_path):
  experiment = _packing_experiment(tmp_path, pack_examples=True, shuffle_buffer_size=1)
  task = base.get_task(experiment)
  model = task.build_model()
  packed = next(iter(task.data_loader(experiment.train_data).dataset()))
  # Sentences of 5-8 pieces: two or three share each 16-token row.
  assert packed[constants.INPUT_WORD_IDS].shape[0] < 8
  plain = next(iter(helpers.padded_batches(
      task.data_loader(experiment.eval_data).features(), "sentence", 8,
      drop_remainder=True)))
  np.testing.assert_array_equal(packed[constants.EXAMPLE_INDEX], plain[constants.EXAMPLE_INDEX])
  packed_out = model(task.model_inputs(packed), training=False)
  plain_out = model(task.model_inputs(plain), training=False)
  np.testing.assert_allclose(packed_out[LOGITS], plain_out[LOGITS], atol=1e-5)
  np.testing.assert_allclose(task.compute_loss(packed, packed_out, 8)["loss"],
                             task.compute_loss(plain, plain_out, 8)["loss"], atol=1e-6)


def test_one_training_step_on_packed_batches_updates_the_head(tmp_path):
  trainer = Trainer(_packing_experiment(tmp_path, pack_examples=True, shuffle_buffer_size=1),
                    str(tmp_path / "m"))
  before = [v.numpy().copy() for v in trainer.model.classifier.weights]
  expected_accuracy = _first_batch_accuracy(trainer)
  report = trainer.train()
  assert np.isfinite(report["loss"])
  # Over the packed examples of the batch, not over its rows.
  assert report["accuracy"] == pytest.approx(expected_accuracy)
  assert all(not np.allclose(a, v.numpy())
             for a, v in zip(before, trainer.model.classifier.weights))


def test_pack_examples_settings_that_cannot_work_are_config_errors(tmp_path):
  with pytest.raises(configs.ConfigError, match="length_buckets"):
    configs.DataConfig(pack_examples=True, length_buckets=[16]).validate()
  with pytest.raises(configs.ConfigError, match="is_training"):
    configs.DataConfig(pack_examples=True, is_training=False).validate()
  with pytest.raises(configs.ConfigError, match="gradient_accumulation_steps"):
    _packing_experiment(tmp_path, pack_examples=True).override(
        {"trainer": {"gradient_accumulation_steps": 2}})
  with pytest.raises(configs.ConfigError, match="does not read packed batches"):
    base.get_task(helpers.tiny_experiment(
        {"name": "tagging", "label_names": ["O", "B"]},
        {"format": "dummy", "pack_examples": True}, {"format": "dummy"}))
  task = base.get_task(helpers.tiny_experiment(
      {"name": "sentence_prediction", "num_classes": 2},
      {"format": "dummy", "pack_examples": True}, {"format": "dummy"}))
  with pytest.raises(configs.ConfigError, match="raw task files"):
    task.data_loader(task.experiment.train_data).dataset()
