"""Dynamic masking draws from the vocab the pretraining records were made with: the one
tokenizer.vocab_file names, else the one their summary names (as params.yaml records
it); without either the input is refused before the run writes anything."""

import os

import numpy as np
import pytest

import pretraining_fixtures as fx
from bert_tf import configs
from bert_tf.data.creation import create_pretraining_data as cpd
from bert_tf.data.records import pretraining_files
from bert_tf.data.records import pretraining_format
from bert_tf.tasks import base

SEQ, PRED, BATCH = 32, 5, 4


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  """create_pretraining_data's records of a small corpus, its summary naming the vocab;
  returns (record file, vocab file)."""
  directory = tmp_path_factory.mktemp("masking_vocab")
  vocab = fx.write_vocab(directory)
  text = fx.write_text(directory, fx.random_text(20, seed=5))
  output = str(directory / "pretrain.tfrecord")
  cpd.create_pretraining_data(
      text, vocab, output, pretraining_format.PretrainingDataSettings(
          max_seq_length=SEQ, max_predictions_per_seq=PRED, dupe_factor=1),
      progress=False)
  return output, vocab


def _loader(input_path, vocab_file=""):
  experiment = configs.ExperimentConfig.from_dict(
      dict(task=dict(name="pretraining"),
           model=dict(encoder=dict(vocab_size=100, hidden_size=16, num_layers=1,
                                   num_attention_heads=2, intermediate_size=32,
                                   max_position_embeddings=64)),
           tokenizer=dict(vocab_file=vocab_file),
           train_data=dict(format="tfrecord", input_path=input_path, global_batch_size=BATCH,
                           seq_length=SEQ, max_predictions_per_seq=PRED,
                           dynamic_masking=True),
           eval_data=dict(seq_length=SEQ)),
      task_configs=base.task_configs())
  return base.get_task(experiment).data_loader(experiment.train_data)


def _assert_same_batches_with_masks(ours, theirs):
  assert set(ours) == set(theirs)
  for key in ours:
    np.testing.assert_array_equal(np.asarray(ours[key]), np.asarray(theirs[key]), err_msg=key)
  assert (np.asarray(theirs["input_word_ids"]) == fx.VOCAB.index("[MASK]")).any()


def test_dynamic_masking_without_tokenizer_vocab_masks_with_the_records_vocab(records):
  """The host form (the JAX engine's input)."""
  path, vocab = records
  named, inferred = _loader(path, vocab), _loader(path)
  inferred.check_files()
  assert inferred.settings_from_files()["tokenizer"]["vocab_file"] == vocab
  _assert_same_batches_with_masks(next(named.host_batches(num_threads=0)),
                                  next(inferred.host_batches(num_threads=0)))


@pytest.mark.slow  # builds two tf.data pipelines
def test_dynamic_masking_without_tokenizer_vocab_masks_with_the_records_vocab_on_tf_data(
    records):
  path, vocab = records
  _assert_same_batches_with_masks(next(iter(_loader(path, vocab).dataset())),
                                  next(iter(_loader(path).dataset())))


def test_dynamic_masking_without_any_vocab_is_refused_naming_the_setting(records, tmp_path):
  path, _ = records
  # The records without their summary, and with a summary naming a vocab that is gone.
  bare = str(tmp_path / "bare.tfrecord")
  with open(path, "rb") as source, open(bare, "wb") as target:
    target.write(source.read())
  with pytest.raises(pretraining_files.PretrainingInputError,
                     match=r"set tokenizer.vocab_file \(the records have no summary"):
    _loader(bare).check_files()
  moved = str(tmp_path / "moved.tfrecord")
  with open(path, "rb") as source, open(moved, "wb") as target:
    target.write(source.read())
  summary = open(pretraining_format.summary_path_for_record_file(path)).read()
  gone = str(tmp_path / "gone" / "vocab.txt")
  with open(pretraining_format.summary_path_for_record_file(moved), "w") as f:
    f.write(summary.replace(records[1], gone))
  with pytest.raises(pretraining_files.PretrainingInputError) as raised:
    _loader(moved).check_files()
  assert f"the records' summary names {gone}, which does not exist" in str(raised.value)
  assert not os.path.exists(gone)
