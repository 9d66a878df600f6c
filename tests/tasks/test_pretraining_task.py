"""Tests of the pretraining task: model, dummy inputs, losses, metrics, training steps."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import constants
from bert_tf import losses
from bert_tf.tasks import base
from bert_tf.tasks.pretraining import PretrainingTask, PretrainingTaskConfig
from bert_tf.training.tf_engine import strategies
from bert_tf.training.trainer import Trainer

import trainer_helpers


def test_task_is_registered_as_pretraining_with_its_config():
  assert base.registered_tasks()["pretraining"] is PretrainingTask
  assert PretrainingTask.config_cls is PretrainingTaskConfig
  task = base.get_task(trainer_helpers.tiny_experiment())
  assert isinstance(task, PretrainingTask)


def test_dummy_inputs_are_per_replica_batches_with_every_feature():
  experiment = trainer_helpers.tiny_experiment(batch=8)
  task = PretrainingTask(experiment)
  context = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                       num_replicas_in_sync=2)
  batch = next(iter(task.data_loader(experiment.train_data).dataset(context)))
  assert batch[constants.INPUT_WORD_IDS].shape == (4, 16)
  assert batch[constants.MASKED_LM_WEIGHTS].dtype == tf.float32
  assert set(batch) == set(constants.TFRECORD_TO_MODEL_INPUT.values())


def test_dummy_eval_input_is_finite():
  experiment = trainer_helpers.tiny_experiment(batch=8)
  task = PretrainingTask(experiment)
  count = sum(1 for _ in task.data_loader(experiment.eval_data).dataset())
  assert count == 4


def test_masked_lm_loss_divides_by_the_global_weight_sum_under_mirrored_strategy():
  devices = [d.name for d in tf.config.list_logical_devices("CPU")][:2]
  if len(devices) < 2:
    pytest.skip("needs two logical CPU devices")
  strategy = strategies.mirrored_strategy(devices)
  experiment = trainer_helpers.tiny_experiment(batch=8)
  task = PretrainingTask(experiment)
  full = next(iter(task.data_loader(experiment.train_data).dataset()))
  # Replica 1 gets no real predictions at all: a per-replica mean would be wrong.
  weights = full[constants.MASKED_LM_WEIGHTS].numpy()
  weights[4:] = 0.0
  full[constants.MASKED_LM_WEIGHTS] = tf.constant(weights)
  logits = tf.random.stateless_normal([8, 4, 100], seed=[1, 2])
  nsp = tf.random.stateless_normal([8, 2], seed=[3, 4])
  outputs = {constants.MLM_LOGITS: logits, constants.NSP_LOGITS: nsp}
  expected = losses.pretraining_loss(full, outputs)

  halves = [({k: v[:4] for k, v in full.items()}, {k: v[:4] for k, v in outputs.items()}),
            ({k: v[4:] for k, v in full.items()}, {k: v[4:] for k, v in outputs.items()})]

  @tf.function
  def replica_losses():
    def fn():
      replica = tf.distribute.get_replica_context().replica_id_in_sync_group
      features = {k: tf.where(replica == 0, halves[0][0][k], halves[1][0][k]) for k in full}
      outs = {k: tf.where(replica == 0, halves[0][1][k], halves[1][1][k]) for k in outputs}
      # As the trainer does: the normalizers summed over every replica.
      normalizers = {k: tf.distribute.get_replica_context().all_reduce(
          tf.distribute.ReduceOp.SUM, v) for k, v in task.loss_normalizers(features).items()}
      return task.compute_loss(features, outs, global_batch_size=8, **normalizers)
    return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(fn), axis=None)

  summed = replica_losses()
  for key in ("masked_lm_loss", "next_sentence_loss", "loss"):
    np.testing.assert_allclose(summed[key].numpy(), expected[key].numpy(), rtol=1e-5)


def test_reduce_eval_gives_accuracy_and_perplexity_from_per_example_sums():
  task = PretrainingTask(trainer_helpers.tiny_experiment())
  metrics = task.reduce_eval({
      "masked_lm_correct": np.array([1.0, 2.0]), "masked_lm_weight": np.array([2.0, 2.0]),
      "masked_lm_loss_sum": np.array([2.0, 2.0]),
      "next_sentence_correct": np.array([1.0, 0.0]),
      "next_sentence_loss": np.array([0.5, 1.5])})
  assert metrics["masked_lm_accuracy"] == pytest.approx(0.75)
  assert metrics["masked_lm_loss"] == pytest.approx(1.0)
  assert metrics["masked_lm_perplexity"] == pytest.approx(np.e)
  assert metrics["next_sentence_accuracy"] == pytest.approx(0.5)
  assert metrics["next_sentence_loss"] == pytest.approx(1.0)


def test_one_training_step_on_dummy_data_changes_weights_with_a_finite_loss(tmp_path):
  experiment = trainer_helpers.tiny_experiment(steps=1, optimizer=dict(warmup_steps=0))
  trainer = Trainer(experiment, str(tmp_path))
  before = trainer_helpers.weights_of(trainer.model)
  report = trainer.train()
  after = trainer_helpers.weights_of(trainer.model)
  assert np.isfinite(report["loss"])
  assert trainer.step == 1
  assert any(not np.array_equal(before[k], after[k]) for k in before)


# mixed_bfloat16 too: on CPUs without AVX512_BF16/AMX its speed cannot be judged, but
# its training must still learn.
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_a_few_steps_on_one_repeated_batch_drive_the_loss_down(tmp_path, policy):
  experiment = trainer_helpers.tiny_experiment(
      steps=30, optimizer=dict(learning_rate=5e-3, warmup_steps=0),
      trainer=dict(steps_per_loop=10, summary_interval=10, log_interval=10,
                   checkpoint_interval=30),
      runtime=dict(mixed_precision_dtype=policy))

  class OneBatchTask(PretrainingTask):
    def data_loader(self, data_config):
      loader = super().data_loader(data_config)
      dataset = loader.dataset
      loader.dataset = lambda *args: dataset(*args).take(1).cache().repeat()
      return loader

  trainer = Trainer(experiment, str(tmp_path), task=OneBatchTask(experiment))
  first = trainer.train(10)["loss"]
  last = trainer.train(30)["loss"]
  assert last < 0.6 * first


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_step_runs_with_float32_variables_and_loss(tmp_path, policy):
  experiment = trainer_helpers.tiny_experiment(steps=1, runtime=dict(
      mixed_precision_dtype=policy))
  trainer = Trainer(experiment, str(tmp_path))
  assert trainer.model.encoder.embeddings.compute_dtype == policy.split("_")[1]
  report = trainer.train()
  assert np.isfinite(report["loss"])
  assert all(v.dtype == "float32" for v in trainer.model.trainable_variables)
  task = trainer.task
  features = next(iter(task.data_loader(experiment.train_data).dataset()))
  outputs = trainer.model(task.model_inputs(features), training=False)
  assert task.compute_loss(features, outputs, 8)["loss"].dtype == tf.float32
  if policy == "mixed_float16":
    assert trainer.engine.loss_scale is not None and report["loss_scale"] > 1


def _write_records(path, count=16, seq=16, predictions=4, max_id=90):
  rng = np.random.default_rng(0)
  with tf.io.TFRecordWriter(str(path)) as writer:
    for _ in range(count):
      def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))
      positions = sorted(rng.choice(np.arange(1, seq - 1), predictions, replace=False))
      feature = {
          constants.TFRECORD_INPUT_IDS: ints(rng.integers(5, max_id, seq)),
          constants.TFRECORD_INPUT_MASK: ints([1] * seq),
          constants.TFRECORD_SEGMENT_IDS: ints([0] * (seq // 2) + [1] * (seq - seq // 2)),
          constants.TFRECORD_MASKED_LM_POSITIONS: ints(positions),
          constants.TFRECORD_MASKED_LM_IDS: ints(rng.integers(5, max_id, predictions)),
          constants.TFRECORD_MASKED_LM_WEIGHTS: tf.train.Feature(
              float_list=tf.train.FloatList(value=[1.0] * predictions)),
          constants.TFRECORD_NEXT_SENTENCE_LABELS: ints([int(rng.integers(0, 2))]),
      }
      example = tf.train.Example(features=tf.train.Features(feature=feature))
      writer.write(example.SerializeToString())


def _tfrecord_experiment(path, seq=16, predictions=4, **kwargs):
  data = dict(format="tfrecord", input_path=str(path), seq_length=seq,
              max_predictions_per_seq=predictions, shuffle_buffer_size=16)
  return trainer_helpers.tiny_experiment(
      steps=2, train_data=data, eval_data=dict(data, is_training=False), **kwargs)


def test_training_and_evaluation_read_pretraining_tfrecords(tmp_path):
  _write_records(tmp_path / "train.tfrecord")
  trainer = Trainer(_tfrecord_experiment(tmp_path / "train.tfrecord"), str(tmp_path / "run"),
                    log_fn=lambda _: None)
  assert np.isfinite(trainer.train()["loss"])
  assert trainer.evaluate()["num_examples"] == 16


@pytest.mark.parametrize("field,value,expected", [
    ("seq", 32, "seq_length is 32 but the files hold 16"),
    ("predictions", 6, "max_predictions_per_seq is 6 but the files hold 4"),
])
def test_config_that_does_not_fit_the_records_fails_before_training(tmp_path, field, value,
                                                                     expected):
  _write_records(tmp_path / "train.tfrecord")
  experiment = _tfrecord_experiment(tmp_path / "train.tfrecord", **{field: value})
  trainer = Trainer(experiment, str(tmp_path / "run"), log_fn=lambda _: None)
  with pytest.raises(ValueError, match=expected):
    trainer.train()
  assert trainer.step == 0


def test_vocab_smaller_than_the_largest_id_fails_before_training(tmp_path):
  _write_records(tmp_path / "train.tfrecord", max_id=99)
  experiment = _tfrecord_experiment(
      tmp_path / "train.tfrecord",
      model=dict(encoder=dict(trainer_helpers.TINY_ENCODER, vocab_size=60)))
  with pytest.raises(ValueError, match="vocab_size 60 is too small"):
    Trainer(experiment, str(tmp_path / "run"), log_fn=lambda _: None).train()


def test_missing_input_glob_is_an_error(tmp_path):
  experiment = _tfrecord_experiment(tmp_path / "nothing-*.tfrecord")
  with pytest.raises(ValueError, match="nothing-"):
    Trainer(experiment, str(tmp_path / "run"), log_fn=lambda _: None).train()


def test_corrupt_record_is_reported_with_its_file_name(tmp_path):
  good, bad = tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"
  _write_records(good)
  _write_records(bad)
  data = bytearray(bad.read_bytes())
  data[len(data) // 2] ^= 0xFF
  bad.write_bytes(bytes(data))
  experiment = _tfrecord_experiment(f"{good},{bad}")
  with pytest.raises(ValueError, match="b.tfrecord"):
    Trainer(experiment, str(tmp_path / "run"), log_fn=lambda _: None).train(train_steps=20)
