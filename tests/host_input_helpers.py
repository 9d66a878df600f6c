"""TFRecords of every kind the tools write, made small for the host-input tests (they
need TensorFlow to write; the TensorFlow-free reader reads them)."""

import os
from typing import Dict

import numpy as np

import pretraining_fixtures as fx
from bert_tf import configs
from bert_tf import constants
from bert_tf.data.pipelines import loaders
from bert_tf.data.pipelines.loaders import squad as squad_kind
from bert_tf.data.task_files import squad

SEQ, PRED = 32, 5
FINETUNING_SEQ, CHOICES = 16, 3
SHORT_EXAMPLES, SHORT_LENGTH = 12, 4
# name -> (kind, regression)
FINETUNING_KINDS = {
    "sentence": ("sentence", False),
    "regression": ("sentence", True),
    "tagging": ("tagging", False),
    "multiple_choice": ("multiple_choice", False),
}
NUM_LABELS = 5


def finetuning_needs(name: str) -> loaders.InputNeeds:
  """What the loaders of case `name` need: its kind, NUM_LABELS labels (a score for
  regression), CHOICES choices."""
  kind, regression = FINETUNING_KINDS[name]
  return loaders.InputNeeds(
      task=name, record_kind=kind, seed=7, vocab_size=50, regression=regression,
      label_names=() if regression else tuple(f"L{i}" for i in range(NUM_LABELS)),
      options={"num_choices": CHOICES})


def finetuning_spec(name: str):
  """The record spec of case `name`'s kind for FINETUNING_SEQ."""
  needs = finetuning_needs(name)
  return loaders.get_kind(needs.record_kind).spec(
      needs, configs.DataConfig(seq_length=FINETUNING_SEQ))


def write_pretraining_files(directory, num_files: int = 3, gzip: bool = False):
  """Pretraining shards data-0000i-of-0000n.tfrecord[.gz]; returns (paths, counts)."""
  paths, counts = [], []
  suffix = ".tfrecord.gz" if gzip else ".tfrecord"
  for i in range(num_files):
    path = os.path.join(str(directory), f"data-{i:05d}-of-{num_files:05d}{suffix}")
    counts.append(fx.write_record_file(path, num_documents=12, seed=i, gzip=gzip))
    paths.append(path)
  return paths, counts


def finetuning_examples(name: str, num_examples: int = 40) -> Dict[str, np.ndarray]:
  """Synthetic examples of kind `name` padded to FINETUNING_SEQ, numbered in order."""
  needs = finetuning_needs(name)
  examples = loaders.get_kind(needs.record_kind).dummy_arrays(
      needs, configs.DataConfig(global_batch_size=num_examples // 4,
                                seq_length=FINETUNING_SEQ))
  examples[constants.EXAMPLE_INDEX] = np.arange(num_examples, dtype=np.int32)
  # The first SHORT_EXAMPLES are cut to SHORT_LENGTH tokens, so that length buckets
  # below seq_length hold whole batches.
  for key in constants.ENCODER_INPUTS:
    examples[key][:SHORT_EXAMPLES, ..., SHORT_LENGTH:] = 0
  if needs.record_kind == "tagging":
    examples[constants.LABEL_IDS][:SHORT_EXAMPLES, SHORT_LENGTH:] = constants.IGNORE_LABEL
  return examples


def write_finetuning_file(directory, name: str, num_examples: int = 40) -> str:
  """The records tools/create_finetuning_data.py writes for examples of kind `name`."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.data.records import tfrecords  # pylint: disable=g-import-not-at-top
  needs = finetuning_needs(name)
  kind = loaders.get_kind(needs.record_kind)
  path = os.path.join(str(directory), f"{name}.tfrecord")
  ds = tf.data.Dataset.from_tensor_slices(finetuning_examples(name, num_examples))
  tfrecords.write_finetuning_tfrecord(
      ds, path, finetuning_spec(name),
      kind.example_padder(needs, FINETUNING_SEQ),
      dict(kind=kind.name, seq_length=FINETUNING_SEQ, regression=needs.regression))
  return path


def write_squad_file(directory, labelled: bool = True, num_examples: int = 20) -> str:
  """SQuAD window records as the original release writes them (evaluation files
  without the labels)."""
  from bert_tf.data.records import tfrecords  # pylint: disable=g-import-not-at-top
  arrays = squad_kind.span_arrays(num_examples, FINETUNING_SEQ, 50)
  names = {constants.INPUT_WORD_IDS: constants.TFRECORD_INPUT_IDS,
           constants.INPUT_MASK: constants.TFRECORD_INPUT_MASK,
           constants.INPUT_TYPE_IDS: constants.TFRECORD_SEGMENT_IDS}
  labels = (squad.START_POSITIONS, squad.END_POSITIONS, squad.IS_IMPOSSIBLE)
  records = []
  for i in range(num_examples):
    records.append(tfrecords.serialize_example({
        names.get(key, key): value[i] for key, value in arrays.items()
        if labelled or key not in labels}))
  path = os.path.join(str(directory), f"squad_{'train' if labelled else 'eval'}.tfrecord")
  tfrecords.write_records(path, records)
  return path


def task_experiments(files: Dict[str, str]) -> Dict[str, dict]:
  """{case: experiment dict} reading `files` ({"pretraining": comma-separated shards,
  finetuning kind names, "squad"}) for evaluation, in file order, and every task's
  dummy input."""
  # The vocab of the pretraining records (fine-tuning ones hold ids below 50).
  encoder = dict(vocab_size=len(fx.VOCAB), hidden_size=16, num_layers=1, num_attention_heads=2,
                 intermediate_size=32, max_position_embeddings=64)

  def experiment(task, data, **extra):
    data = dict(dict(global_batch_size=6, seq_length=FINETUNING_SEQ, is_training=False,
                     drop_remainder=False), **data)
    return dict(dict(task=task, model=dict(encoder=encoder), train_data=data,
                     eval_data=data, runtime=dict(seed=5)), **extra)

  tasks = {
      "sentence": dict(name="sentence_prediction", num_classes=5),
      "regression": dict(name="sentence_prediction", num_classes=1),
      "tagging": dict(name="tagging", label_names=[f"T{i}" for i in range(5)]),
      "multiple_choice": dict(name="multiple_choice", num_choices=CHOICES),
  }
  cases = {"pretraining": experiment(
      dict(name="pretraining"), dict(input_path=files["pretraining"], seq_length=SEQ,
                                     max_predictions_per_seq=PRED))}
  cases["pretraining_dummy"] = experiment(
      dict(name="pretraining"), dict(format="dummy", seq_length=SEQ,
                                     max_predictions_per_seq=PRED))
  for name, task in tasks.items():
    cases[name] = experiment(task, dict(input_path=files[name], length_buckets=[4, 8]))
    cases[f"{name}_dummy"] = experiment(task, dict(format="dummy"))
  cases["squad"] = experiment(dict(name="squad"), dict(input_path=files["squad"]))
  cases["squad_dummy"] = experiment(dict(name="squad"), dict(format="dummy"))
  return cases


def dynamic_masking_experiment(files: Dict[str, str]) -> dict:
  """A pretraining experiment dict training on files["pretraining"] with whole-word
  dynamic masking, the vocab files["vocab"]."""
  data = dict(input_path=files["pretraining"], seq_length=SEQ, max_predictions_per_seq=PRED,
              global_batch_size=6, dynamic_masking=True, whole_word_masking=True)
  return dict(task=dict(name="pretraining"), train_data=data,
              tokenizer=dict(vocab_file=files["vocab"]), runtime=dict(seed=5))
