"""A record kind added by one module, this one, with no edit elsewhere: its raw-format
reader, its kind (spec, synthetic batches, a feature of its own with a token axis and
its fill, featurizer, loaders) and a task reading it, registered here under names
qualified by this module's path (no other module can register them), give both
engines' inputs the same batches padded to length buckets, and train and evaluate on
both engines, from raw files and from the TFRecords written from them
(CONTRIBUTING.md, "Adding a record kind").

Run as a script (`KERAS_BACKEND=jax python THIS_FILE CONFIG_YAML MODEL_DIR`), it trains
and evaluates the experiment of CONFIG_YAML on the engine of that backend and prints
`RESULT <json>` of the metrics: Keras fixes its backend per process.
"""

import dataclasses
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from keras import ops

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

import finetuning_helpers  # pylint: disable=g-import-not-at-top,wrong-import-position
import paths  # pylint: disable=g-import-not-at-top,wrong-import-position
import registry_names  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf import configs  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf import constants  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf import losses  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.checkpoints import restore  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.data.pipelines import loaders  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.data.pipelines.loaders import features  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.data.pipelines.loaders import sentence  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.data.records import record_specs  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.data.task_files import glue  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.data.task_files import readers  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.metrics import sums  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.models.bert_classifier import LOGITS, BertClassifier  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.tasks import base  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top,wrong-import-position

# Names registered here, which no other module registers (tests/registry_names.py).
TOY_LINES = registry_names.local_name("toy_lines", __file__)
PARITY = registry_names.local_name("parity", __file__)
TOY_TASK = registry_names.local_name("toy_parity", __file__)
NUM_WORDS = "num_words"
# A feature with a token axis: each token's place in its example, PAST_END past it.
PIECE_INDEX = "piece_index"
PAST_END = -1


# ----- 1. a reader of the raw format -----
@readers.register_reader(TOY_LINES)
def read_toy_lines(data_config, options):
  """One sentence a line; its label says whether its word count is odd."""
  del options
  return readers.read_numbered(data_config.input_path, lambda path: [
      glue.SentenceExample(0, line.strip(), None, len(line.split()) % 2)
      for line in open(path, encoding="utf-8") if line.strip()])


# ----- 2. the record kind -----
class ParityRecords(features.FeatureKind):
  """label_ids int32 [B] (the word count's parity); num_words int32 [B]; piece_index
  int32 [B, T] (0, 1, ... over an example's tokens, PAST_END after them)."""

  name = PARITY
  raw_formats = (TOY_LINES,)

  def label_feature(self, needs, seq_length):
    return record_specs.RecordFeature(constants.LABEL_IDS, constants.LABEL_IDS, ())

  def extra_features(self, needs, seq_length):
    return (record_specs.RecordFeature(NUM_WORDS, NUM_WORDS, (), default=0),
            self.token_feature(needs, seq_length, PIECE_INDEX, fill=PAST_END))

  def dummy_labels(self, rng, needs, mask):
    words = np.maximum(mask.sum(axis=-1) - 2, 0).astype(np.int32)
    pieces = np.where(mask > 0, np.arange(mask.shape[-1]), PAST_END).astype(np.int32)
    return {constants.LABEL_IDS: words % 2, NUM_WORDS: words, PIECE_INDEX: pieces}

  def featurize(self, needs, examples, seq_length):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    sentences = sentence.sentence_dataset(
        examples, self.tokenizer(needs), seq_length, [e.label for e in examples], False)
    words = tf.constant([len(e.text_a.split()) for e in examples], tf.int32)
    return sentences.map(lambda f: dict(f, **{
        NUM_WORDS: tf.gather(words, f[constants.EXAMPLE_INDEX]),
        PIECE_INDEX: tf.range(tf.shape(f[constants.INPUT_MASK])[-1], dtype=tf.int32)}))


loaders.register_kind(ParityRecords())


# ----- 3. a task reading it -----
@dataclasses.dataclass
class ParityConfig(configs.TaskConfig):
  """Whether a sentence has an odd number of words."""

  name: str = TOY_TASK


@base.register_task(TOY_TASK, ParityConfig)
class ParityTask(base.Task):
  """A two-class classifier of the [CLS] vector."""

  record_kind = PARITY
  label_names = ("even", "odd")

  def build_model(self):
    return BertClassifier(self.build_encoder(), 2, dropout_rate=0.0, name="parity")

  def _per_example_loss(self, features, outputs):
    return losses.classification_loss(features[constants.LABEL_IDS], outputs[LOGITS])

  def compute_loss(self, features, outputs, global_batch_size):
    return {"loss": losses.global_mean(self._per_example_loss(features, outputs),
                                       global_batch_size)}

  def train_metrics(self, features, outputs):
    return {"accuracy": sums.accuracy_sums(outputs[LOGITS], features[constants.LABEL_IDS])}

  def eval_outputs(self, features, outputs):
    return {"correct": sums.correct(sums.predicted_ids(outputs[LOGITS]),
                                    features[constants.LABEL_IDS]),
            "loss": self._per_example_loss(features, outputs),
            NUM_WORDS: ops.cast(features[NUM_WORDS], "float32")}

  def reduce_eval(self, values):
    return {"accuracy": float(np.mean(values["correct"])),
            "loss": float(np.mean(values["loss"])),
            "num_examples": float(len(values["correct"])),
            "words": float(np.sum(values[NUM_WORDS]))}


# ----- the tests -----
def _write_lines(path, rng, n):
  with open(path, "w", encoding="utf-8") as f:
    for _ in range(n):
      f.write(" ".join(rng.choice(finetuning_helpers.WORDS[:13], rng.integers(1, 9))) + "\n")
  return str(path)


def _experiment(tmp_path, train, evaluation, steps=4):
  return finetuning_helpers.tiny_experiment(
      {"name": TOY_TASK}, train, evaluation, steps=steps,
      vocab_file=finetuning_helpers.write_vocab(tmp_path / "vocab.txt"))


def test_the_toy_kind_s_formats_are_its_own_and_its_dummy_batches_fit_its_spec(tmp_path):
  experiment = _experiment(tmp_path, {"format": "dummy"}, {"format": "dummy"})
  task = base.get_task(experiment)
  assert loaders.formats_of(PARITY) == ("dummy", "tfrecord", TOY_LINES)
  loader = task.data_loader(experiment.train_data)
  spec = loader.kind.spec(task.input_needs, experiment.train_data)
  batch = next(loader.host_batches())
  assert set(batch) == {feature.key for feature in spec}
  np.testing.assert_array_equal(batch[constants.LABEL_IDS], batch[NUM_WORDS] % 2)
  assert loader.token_fills() == {**dict.fromkeys(constants.ENCODER_INPUTS, 0),
                                  PIECE_INDEX: PAST_END}
  with np.testing.assert_raises(configs.ConfigError):
    task.data_loader(experiment.train_data.replace(format="tsv"))


def _engine_inputs(task, data_config, steps):
  """The first `steps` training batches of each engine's input: the TensorFlow engine's
  (tf.data, padded to length buckets by the engine) and the JAX engine's (host
  batches), as NumPy."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.training.jax_engine import input as jax_input  # pylint: disable=g-import-not-at-top
  from bert_tf.training.tf_engine import input as tf_input  # pylint: disable=g-import-not-at-top
  tf_side = tf_input.TrainerInput(tf.distribute.OneDeviceStrategy("/cpu:0"), task,
                                  pads_to_length_buckets=True, log_fn=lambda _: None)
  dataset = tf_side.build_inputs(data_config, tf.distribute.InputContext())
  tf_batches = [{k: v.numpy() for k, v in batch.items()} for batch in dataset.take(steps)]
  host = jax_input.HostInput(task, data_config, 0, 1)
  return tf_batches, [host.next_batch() for _ in range(steps)]


def test_both_engines_inputs_pad_the_kind_s_own_token_feature_to_length_buckets(tmp_path):
  rng = np.random.default_rng(0)
  buckets = {"length_buckets": [4, 8], "shuffle_buffer_size": 16}
  raw = {"format": TOY_LINES, "input_path": _write_lines(tmp_path / "train.txt", rng, 32)}
  experiment = _experiment(tmp_path, dict(raw, **buckets), {"format": "dummy"})
  task = base.get_task(experiment)
  # The kind's records of the lines, written from their features featurized once (the
  # slow test below writes them as tools/create_finetuning_data.py does).
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  loader = task.data_loader(experiment.train_data)
  records = str(tmp_path / "train.tfrecord")
  loaders.tf_data().tfrecords.write_finetuning_tfrecord(
      tf.data.Dataset.from_tensor_slices(loader.arrays()), records,
      loader.kind.spec(task.input_needs, experiment.train_data), dict, {})
  for source in (raw, {"format": "tfrecord", "input_path": records}, {"format": "dummy"}):
    data = experiment.train_data.replace(**source)
    tf_batches, host_batches = _engine_inputs(task, data, steps=4)
    widths = set()
    for step, (theirs, ours) in enumerate(zip(tf_batches, host_batches)):
      assert set(ours) == set(theirs), (source["format"], step)
      for key, value in theirs.items():
        np.testing.assert_array_equal(ours[key], value,
                                      err_msg=f"{source['format']} step {step} {key}")
      mask = ours[constants.INPUT_MASK]
      assert ours[PIECE_INDEX].shape == mask.shape, (source["format"], step)
      np.testing.assert_array_equal(
          ours[PIECE_INDEX], np.where(mask > 0, np.arange(mask.shape[-1]), PAST_END))
      widths.add(mask.shape[-1])
    assert widths <= {4, 8, 16}, (source["format"], widths)
    # The lines' examples (3 to 10 tokens) fill more than one bucket.
    assert len(widths) > 1 or source["format"] == "dummy", (source["format"], widths)


def _run_on(backend, experiment, model_dir):
  """The metrics of experiment trained and evaluated on `backend`'s engine, in a
  process of its own."""
  config = os.path.join(model_dir + ".yaml")
  experiment.save(config)
  env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
  result = subprocess.run([sys.executable, os.path.abspath(__file__), config, model_dir],
                          env=dict(env, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2"),
                          capture_output=True, text=True, timeout=900, cwd=paths.ROOT)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  line = [l for l in result.stdout.splitlines() if l.startswith("RESULT ")][-1]
  return json.loads(line[len("RESULT "):])


@pytest.mark.slow  # a training on each engine, each in a process
def test_a_kind_defined_here_trains_and_evaluates_on_both_engines(tmp_path):
  rng = np.random.default_rng(0)
  train = {"format": TOY_LINES, "input_path": _write_lines(tmp_path / "train.txt", rng, 64)}
  raw_eval = {"format": TOY_LINES, "input_path": _write_lines(tmp_path / "eval.txt", rng, 20)}
  experiment = _experiment(tmp_path, train, raw_eval)
  # The kind's TFRecords, written from the raw evaluation file, are evaluated.
  records = str(tmp_path / "eval.tfrecord")
  meta = features.write_tfrecord(
      base.get_task(experiment).data_loader(experiment.eval_data), records)
  assert (meta["kind"], meta["num_examples"]) == (PARITY, 20)
  words = sum(len(line.split()) for line in open(raw_eval["input_path"], encoding="utf-8"))
  experiment = experiment.override({"eval_data": {"format": "tfrecord",
                                                  "input_path": records}})
  for backend in ("tensorflow", "jax"):
    metrics = _run_on(backend, experiment, str(tmp_path / backend))
    assert metrics["backend"] == backend
    assert metrics["eval/num_examples"] == 20 and metrics["eval/words"] == words, backend
    assert 0.0 <= metrics["eval/accuracy"] <= 1.0, backend
    assert math.isfinite(metrics["eval/loss"]) and math.isfinite(metrics["loss"]), backend
    latest = restore.resolve_checkpoint(str(tmp_path / backend))
    assert os.path.basename(latest).startswith("ckpt-4."), (backend, latest)


if __name__ == "__main__":
  import keras  # pylint: disable=g-import-not-at-top
  metrics = trainer_lib.run_experiment(experiments.experiment_from_yaml(sys.argv[1]),
                                       sys.argv[2], "train_and_eval")
  print("RESULT " + json.dumps(dict(metrics, backend=keras.backend.backend())), flush=True)
