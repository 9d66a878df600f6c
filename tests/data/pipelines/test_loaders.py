"""Every data loader of the package gives the same batches in both forms: its tf.data
form (two replicas of one pipeline) and its host form (two processes) read the same rows
in the one order, shuffled over several epochs, with the same features and values."""

import json

import numpy as np
import pytest
import tensorflow as tf

import finetuning_helpers
import host_input_helpers as helpers
import pretraining_fixtures as fx
from bert_tf import configs
from bert_tf import constants
from bert_tf.data.pipelines import loaders
from bert_tf.data.pipelines import padding
from bert_tf.data.pipelines.loaders import registry
from bert_tf.data.records import record_specs
from bert_tf.tasks import base

STEPS, BATCH, SEQ = 5, 8, 16
ENCODER = dict(vocab_size=100, hidden_size=16, num_layers=1, num_attention_heads=2,
               intermediate_size=32, max_position_embeddings=64)
TASKS = {
    "pretraining": dict(name="pretraining"),
    "sentence": dict(name="sentence_prediction", num_classes=2),
    "tagging": dict(name="tagging", label_names=["O", "B-COL"]),
    "multiple_choice": dict(name="multiple_choice", num_choices=4),
    "squad": dict(name="squad"),
}
WORDS = ["red", "blue", "green", "dog", "man", "home", "mat", "the", "cat"]
# Read from the network: no file of this test holds them.
NOT_COVERED = {("sentence", "tfds")}
DEFAULT_CASES = {("sentence", "tsv"), ("sentence", "tsv+pack_examples")}


def _tsv(path, rng, n):
  lines = ["sentence\tlabel"] + [f"{' '.join(rng.choice(WORDS, rng.integers(2, 9)))}\t{i % 2}"
                                 for i in range(n)]
  path.write_text("\n".join(lines) + "\n")
  return str(path)


def _conll(path, rng, n):
  lines = []
  for _ in range(n):
    lines += [f"{w} {'B-COL' if w in WORDS[:3] else 'O'}"
              for w in rng.choice(WORDS, rng.integers(2, 8))] + [""]
  path.write_text("\n".join(lines) + "\n")
  return str(path)


def _swag(path, rng, n):
  lines = [",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,"
           "ending3,label"]
  for i in range(n):
    words = rng.choice(WORDS, 5)
    lines.append(f"{i},v,{i},s,{words[0]},the,gold,{','.join(words[1:])},{i % 4}")
  path.write_text("\n".join(lines) + "\n")
  return str(path)


def _squad_json(path, rng, n):
  paragraphs = []
  for i in range(n):
    words = list(rng.choice(WORDS[:-1], 10))
    marker = int(rng.integers(0, 8))
    words[marker] = "cat"
    paragraphs.append({"context": " ".join(words), "qas": [{
        "id": f"q{i}", "question": "what follows cat ?",
        "answers": [{"text": words[marker + 1],
                     "answer_start": len(" ".join(words[:marker + 1])) + 1}]}]})
  path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t",
                                                          "paragraphs": paragraphs}]}))
  return str(path)


RAW = {("sentence", "tsv"): _tsv, ("sentence", "csv"): None,
       ("tagging", "conll"): _conll,
       ("multiple_choice", "swag_csv"): _swag, ("squad", "squad_json"): _squad_json}
CASES = sorted({*((kind, fmt) for kind in TASKS for fmt in loaders.formats_of(kind)),
                ("pretraining", "tfrecord+dynamic_masking"),
                ("sentence", "tsv+pack_examples")} - NOT_COVERED)


def _data(tmp_path, kind, fmt):
  """The train_data section of case (kind, fmt) and the files it reads."""
  rng = np.random.default_rng(3)
  fmt, _, setting = fmt.partition("+")
  data = dict(format=fmt, global_batch_size=BATCH, seq_length=SEQ, shuffle_buffer_size=5)
  if setting:
    data[setting] = True
  if kind == "pretraining":
    data.update(seq_length=helpers.SEQ, max_predictions_per_seq=helpers.PRED)
    if fmt == "tfrecord":
      data["input_path"] = ",".join(helpers.write_pretraining_files(tmp_path)[0])
  elif fmt == "tfrecord" and kind == "squad":
    data["input_path"] = helpers.write_squad_file(tmp_path)
  elif fmt == "tfrecord":
    data.update(input_path=helpers.write_finetuning_file(tmp_path, kind),
                length_buckets=[4, 8])
  elif fmt == "csv":
    tsv = _tsv(tmp_path / "train.tsv", rng, 30)
    with open(tsv, encoding="utf-8") as f:
      (tmp_path / "train.csv").write_text(f.read().replace("\t", ","))
    data.update(input_path=str(tmp_path / "train.csv"))
  elif fmt != "dummy":
    data["input_path"] = RAW[(kind, fmt)](tmp_path / f"train.{fmt}", rng, 30)
    if kind == "squad":
      data["seq_length"] = 2 * SEQ
    if kind != "squad" and not setting:
      data["length_buckets"] = [4, 8]
  return data


def _experiment(tmp_path, kind, fmt):
  vocab = (fx.write_vocab(tmp_path) if kind == "pretraining" else
           finetuning_helpers.write_vocab(tmp_path / "vocab.txt"))
  task = dict(TASKS[kind])
  if kind == "sentence" and fmt.startswith(("csv", "tsv")):
    task["text_a_column"] = "sentence"
  if kind == "multiple_choice" and fmt == "tfrecord":
    task["num_choices"] = helpers.CHOICES
  return configs.ExperimentConfig.from_dict(
      dict(task=task, model=dict(encoder=ENCODER), tokenizer=dict(vocab_file=vocab),
           train_data=_data(tmp_path, kind, fmt), eval_data=dict(seq_length=SEQ),
           runtime=dict(seed=11)),
      task_configs=base.task_configs())


def _as_host_pads(batch, loader):
  """A tf.data batch as NumPy, its token features padded as the host form pads them."""
  batch = {key: value.numpy() for key, value in batch.items()}
  if constants.PACKED_EXAMPLE_SLOTS in batch:
    width = loader.data_config.seq_length
    return {key: (np.pad(value, [(0, 0), (0, width - value.shape[1])])
                  if value.ndim == 2 and key != constants.PACKED_CLS_POSITIONS else value)
            for key, value in batch.items()}
  if constants.LABEL_IDS in batch:
    lengths = padding.bucket_lengths(padding.bucket_bounds(loader.data_config))
    return padding.pad_batch_to_bucket(batch, lengths, loader.token_fills())
  return batch


def test_the_cases_cover_every_loader_of_the_package_s_tasks():
  registered = {(kind, fmt) for kind in TASKS for fmt in registry.get_kind(kind).formats}
  assert {(kind, fmt.partition("+")[0]) for kind, fmt in CASES} == registered - NOT_COVERED


# Two cases in the default suite (raw files, packed); every loader under -m slow.
@pytest.mark.parametrize("kind,fmt", [
    case if case in DEFAULT_CASES else pytest.param(*case, marks=pytest.mark.slow)
    for case in CASES])
def test_both_forms_of_a_loader_read_the_same_training_batches(tmp_path, kind, fmt):
  experiment = _experiment(tmp_path, kind, fmt)
  data_config = experiment.train_data
  loader = base.get_task(experiment).data_loader(data_config)
  context = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                       num_replicas_in_sync=2)
  tf_batches = list(loader.dataset(context).take(2 * STEPS))
  processes = [loader.host_batches(process, 2, num_threads=0) for process in (0, 1)]
  for step in range(STEPS):
    for process, host in enumerate(processes):
      ours = next(host)
      theirs = _as_host_pads(tf_batches[2 * step + process], loader)
      assert set(ours) == set(theirs), (step, process)
      for key, value in theirs.items():
        np.testing.assert_array_equal(ours[key], value,
                                      err_msg=f"step {step} process {process} {key}")


@pytest.mark.parametrize("kind", ["pretraining", "sentence"])
def test_a_record_holding_a_token_id_beyond_the_vocab_is_refused_by_both_engines_inputs(
    tmp_path, kind):
  from bert_tf.training.jax_engine import input as jax_input  # pylint: disable=g-import-not-at-top
  from bert_tf.training.tf_engine import input as tf_input  # pylint: disable=g-import-not-at-top
  experiment = _experiment(tmp_path, kind, "tfrecord")
  evaluation = experiment.train_data.replace(is_training=False, drop_remainder=False)
  ids = (constants.INPUT_WORD_IDS, constants.MASKED_LM_IDS)
  largest = max(int(batch[key].max()) for batch in base.get_task(experiment).data_loader(
      evaluation).host_batches(num_threads=0) for key in ids if key in batch)
  # The model has no embedding for the largest id of the files.
  task = base.get_task(experiment.override({"model": {"encoder": {"vocab_size": largest}}}))
  for data_config in (experiment.train_data, evaluation):
    with pytest.raises(tf.errors.InvalidArgumentError) as tf_raised:
      for _ in task.data_loader(data_config).dataset():
        pass
    with pytest.raises(record_specs.TokenIdError) as host_raised:
      for _ in task.data_loader(data_config).host_batches(num_threads=0):
        pass
    tf_error = tf_input.corrupt_input_error(task, tf_raised.value, data_config)
    host_error = jax_input.corrupt_input_error(task, host_raised.value, data_config)
    assert str(tf_error) == str(host_error)
    assert isinstance(tf_error, record_specs.TokenIdError)
    assert str(host_error).startswith(tuple(data_config.input_path.split(",")))
    assert " at byte offset " in str(host_error) and "\n" not in str(host_error)
    assert str(host_error).endswith(
        f"holds token id {largest}, not below the model's vocab_size {largest}")
