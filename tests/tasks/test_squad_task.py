"""The squad task: model, loss, a training step on dummy input, warm start, evaluation
files, and a tiny end-to-end run that learns a synthetic span task."""

import dataclasses
import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import configs
from bert_tf import constants
from bert_tf.data.task_files import squad as squad_data
from bert_tf.data.records import squad_records
from bert_tf.models.bert_span_labeler import END_LOGITS, START_LOGITS
from bert_tf.tasks import base
from bert_tf.text.tokenizer import BertWordPieceTokenizer
from bert_tf.training import experiments
from bert_tf.training.trainer import Trainer
import paths

ENCODER = dict(vocab_size=100, hidden_size=32, num_layers=2, num_attention_heads=2,
               intermediate_size=64, max_position_embeddings=64, dropout_rate=0.0,
               attention_dropout_rate=0.0)


def experiment(train_data=None, eval_data=None, task=None, steps=2, lr=1e-3, vocab_file="",
               **encoder):
  return experiments.experiment_from_dict({
      "task": dict({"name": "squad"}, **(task or {})),
      "model": {"encoder": dict(ENCODER, **encoder)},
      "tokenizer": {"vocab_file": vocab_file, "lower_case": True},
      "train_data": dict({"format": "dummy", "global_batch_size": 4, "seq_length": 24},
                         **(train_data or {})),
      "eval_data": dict({"format": "dummy", "global_batch_size": 4, "seq_length": 24,
                         "is_training": False, "drop_remainder": False},
                        **(eval_data or {})),
      "optimizer": {"learning_rate": lr, "warmup_steps": 0, "weight_decay_rate": 0.0},
      "trainer": {"train_steps": steps, "steps_per_loop": steps, "checkpoint_interval": steps,
                  "summary_interval": steps, "log_interval": steps,
                  "validation_interval": steps},
  })


def test_squad_task_config_has_paper_defaults_and_rejects_typos():
  config = experiments.experiment_from_dict({"task": {"name": "squad"}}).task
  assert (config.doc_stride, config.max_query_length, config.n_best_size,
          config.max_answer_length, config.version_2_with_negative) == (128, 64, 20, 30, False)
  with pytest.raises(configs.ConfigError, match="doc_strid"):
    experiments.experiment_from_dict({"task": {"name": "squad", "doc_strid": 3}})


def test_official_squad_configs_load():
  root = os.path.join(paths.ROOT, "official_configs", "experiments")
  v1 = experiments.experiment_from_yaml(os.path.join(root, "squad_v1.1.yaml"))
  v2 = experiments.experiment_from_yaml(os.path.join(root, "squad_v2.0.yaml"))
  assert v1.task.name == v2.task.name == "squad"
  assert v1.train_data.seq_length == 384 and not v1.task.version_2_with_negative
  assert v2.task.version_2_with_negative


def test_loss_is_mean_of_start_and_end_cross_entropy_over_global_batch():
  task = base.get_task(experiment())
  start = np.log(np.array([[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]], np.float32))
  end = np.log(np.array([[0.2, 0.2, 0.6], [0.5, 0.25, 0.25]], np.float32))
  features = {squad_data.START_POSITIONS: tf.constant([0, 1]),
              squad_data.END_POSITIONS: tf.constant([2, 0])}
  losses = task.compute_loss(features, {START_LOGITS: start, END_LOGITS: end},
                             global_batch_size=4)
  expected = (-np.log(0.5) - np.log(0.8) - np.log(0.6) - np.log(0.5)) / 2 / 4
  assert float(losses["loss"]) == pytest.approx(expected, rel=1e-5)
  metrics = task.train_metrics(features, {START_LOGITS: start, END_LOGITS: end})
  assert [float(x) for x in metrics["start_accuracy"]] == [2.0, 2.0]
  assert [float(x) for x in metrics["end_accuracy"]] == [2.0, 2.0]


def test_one_training_step_on_dummy_input_changes_weights_with_finite_loss(tmp_path):
  exp = experiment(steps=1)
  trainer = Trainer(exp, str(tmp_path))
  trainer.initialize()
  before = [v.numpy().copy() for v in trainer.model.span_labeler.weights]
  report = trainer.train()
  assert np.isfinite(report["loss"])
  after = [v.numpy() for v in trainer.model.span_labeler.weights]
  assert any(not np.allclose(a, b) for a, b in zip(before, after))
  metrics = trainer.evaluate()
  hits, count = {"start": 0, "end": 0}, 0
  steps = exp.trainer.validation_steps
  for i, batch in enumerate(trainer.task.data_loader(exp.eval_data).dataset()):
    if steps and i >= steps:
      break
    outputs = trainer.model(trainer.task.model_inputs(batch), training=False)
    count += len(batch[squad_data.START_POSITIONS])
    for side, logits, labels in (("start", START_LOGITS, squad_data.START_POSITIONS),
                                 ("end", END_LOGITS, squad_data.END_POSITIONS)):
      hits[side] += int(np.sum(np.argmax(outputs[logits], -1) == batch[labels]))
  assert metrics["start_accuracy"] == pytest.approx(hits["start"] / count)
  assert metrics["end_accuracy"] == pytest.approx(hits["end"] / count)


def test_warm_start_restores_the_encoder_from_a_pretraining_checkpoint(tmp_path):
  exp = experiment()
  source = base.get_task(exp).build_model()
  prefix = tf.train.Checkpoint(encoder=source.encoder).write(str(tmp_path / "pre"))
  exp = exp.override({"task": {"init_checkpoint": prefix}})
  task = base.get_task(exp)
  model = task.build_model()
  assert task.initialize(model) == {"encoder": prefix}
  for a, b in zip(source.encoder.weights, model.encoder.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


# --------------------------------------------------------------------------------------
# A learnable synthetic SQuAD: the answer is the word right after the marker "zz".

SYNTH_VOCAB = [*constants.SPECIAL_TOKENS, "zz", "what", "follows", "?",
               *[f"w{i}" for i in range(30)]]


def synthetic_squad(num_questions, seed, context_words=12):
  rng = np.random.default_rng(seed)
  paragraphs = []
  for i in range(num_questions):
    words = [f"w{j}" for j in rng.integers(0, 30, size=context_words)]
    marker = int(rng.integers(0, context_words - 1))
    words[marker] = "zz"
    context = " ".join(words)
    answer = words[marker + 1]
    start = len(" ".join(words[:marker + 1])) + 1
    paragraphs.append({"context": context, "qas": [{
        "id": f"q{i}", "question": "what follows zz ?",
        "answers": [{"text": answer, "answer_start": start}]}]})
  return {"version": "1.1", "data": [{"title": "synthetic", "paragraphs": paragraphs}]}


@pytest.mark.slow  # a learning run
def test_tiny_model_learns_synthetic_span_task_well_above_chance(tmp_path):
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(SYNTH_VOCAB) + "\n")
  for name, n, seed in (("train", 512, 0), ("dev", 64, 1)):
    (tmp_path / f"{name}.json").write_text(json.dumps(synthetic_squad(n, seed)))
  data = {"format": "squad_json", "seq_length": 24}
  exp = experiment(
      train_data=dict(data, input_path=str(tmp_path / "train.json"), global_batch_size=32),
      eval_data=dict(data, input_path=str(tmp_path / "dev.json"), global_batch_size=32,
                     is_training=False, drop_remainder=False),
      task={"max_answer_length": 4}, steps=300, lr=3e-3, vocab_file=str(vocab),
      vocab_size=len(SYNTH_VOCAB))
  # The trainer initializes from runtime.seed: seeds 0-3 reach 98-100 exact match; one
  # in five or so of other seeds stays lower (this tiny model sometimes locks on early).
  exp = dataclasses.replace(exp, runtime=dataclasses.replace(exp.runtime, seed=0))
  trainer = Trainer(exp, str(tmp_path / "model"))
  trainer.train()
  metrics = trainer.evaluate()
  # Chance is about 1 / 12 (one of the context words).
  assert metrics["exact_match"] > 80.0, metrics
  assert metrics["f1"] >= metrics["exact_match"]


def test_evaluation_writes_prediction_files_for_v2(tmp_path):
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(SYNTH_VOCAB) + "\n")
  dev = synthetic_squad(3, 2)
  dev["data"][0]["paragraphs"][0]["qas"][0].update(answers=[], is_impossible=True)
  (tmp_path / "dev.json").write_text(json.dumps(dev))
  exp = experiment(eval_data={"format": "squad_json", "input_path": str(tmp_path / "dev.json")},
                   task={"version_2_with_negative": True}, vocab_file=str(vocab),
                   vocab_size=len(SYNTH_VOCAB))
  task = base.get_task(exp)
  model = task.build_model()
  batch = next(iter(task.data_loader(exp.eval_data).dataset()))
  values = {k: np.asarray(v) for k, v in task.eval_outputs(batch, model(
      task.model_inputs(batch))).items()}
  metrics = task.reduce_eval(values)
  assert metrics["NoAns_total"] == 1 and metrics["HasAns_total"] == 2
  assert "best_f1_thresh" in metrics
  task.write_predictions(values, str(tmp_path / "out"))
  assert sorted(os.listdir(tmp_path / "out")) == ["nbest_predictions.json", "null_odds.json",
                                                  "predictions.json"]
  with open(tmp_path / "out" / "predictions.json") as f:
    assert sorted(json.load(f)) == ["q0", "q1", "q2"]


def test_tfrecord_input_yields_the_same_batches_as_json_input(tmp_path):
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(SYNTH_VOCAB) + "\n")
  (tmp_path / "train.json").write_text(json.dumps(synthetic_squad(6, 3)))
  record = str(tmp_path / "train.tfrecord")
  summary = squad_records.write_squad_tfrecords(
      str(tmp_path / "train.json"), record,
      BertWordPieceTokenizer(str(vocab), lower_case=True), is_training=True,
      max_seq_length=24)
  assert summary["num_features"] == 6
  common = {"seq_length": 24, "global_batch_size": 6, "is_training": False,
            "drop_remainder": False}
  exp = experiment(vocab_file=str(vocab), vocab_size=len(SYNTH_VOCAB))
  task = base.get_task(exp)
  from_json = next(iter(task.data_loader(configs.DataConfig(
      format="squad_json", input_path=str(tmp_path / "train.json"), **common)).dataset()))
  from_records = next(iter(task.data_loader(configs.DataConfig(
      format="tfrecord", input_path=record, **common)).dataset()))
  assert sorted(from_json) == sorted(from_records)
  for name in from_json:
    np.testing.assert_array_equal(from_json[name].numpy(), from_records[name].numpy(), name)
