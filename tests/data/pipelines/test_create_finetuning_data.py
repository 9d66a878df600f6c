"""Task files -> TFRecords: equal features, atomic writing, the command-line tool."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import finetuning_helpers as helpers
from bert_tf import constants
from bert_tf.data.pipelines.loaders import features
from bert_tf.data.records import record_specs
from bert_tf.data.records import tfrecords
from bert_tf.data.task_files import glue
from bert_tf.tasks import base
import paths

ROOT = paths.ROOT


def _experiment(tmp_path, task, fmt, text, name):
  vocab = helpers.write_vocab(tmp_path / "vocab.txt")
  path = tmp_path / name
  path.write_text(text)
  data = dict(format=fmt, input_path=str(path))
  return helpers.tiny_experiment(task, data, data, vocab_file=vocab)


CASES = {
    "sentence": ({"name": "sentence_prediction", "glue_task": "rte"}, "tsv",
                 "index\tsentence1\tsentence2\tlabel\n0\tthe cat sat\ton the mat\tentailment\n"
                 "1\tgood movie\tbad movie on the mat\tnot_entailment\n"
                 "2\ta man\twalks home\tentailment\n", "rte.tsv"),
    "stsb": ({"name": "sentence_prediction", "glue_task": "stsb"}, "tsv",
             "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
             "\tscore\n0\tg\tf\ty\t0\tn\tn\tthe cat\tthe dog\t3.250\n"
             "1\tg\tf\ty\t0\tn\tn\ta man walks home\tgood\t0.5\n", "stsb.tsv"),
    # The last sentence (24 pieces) is read in windows of 14 pieces, 4 apart.
    "tagging": ({"name": "tagging", "window_stride": 4}, "conll",
                "John B-PER\nplaying O\n\nParis B-LOC\nParisians B-MISC\nsat O\n\n"
                + "John B-PER\nplaying O\n" * 8, "ner.txt"),
    "choice": ({"name": "multiple_choice"}, "swag_csv",
               ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,"
               "ending3,label\n0,v,1,s,a man walks,the,gold,dog,cat sat on the mat,man,home,1\n"
               "1,v,1,s,the cat,runs,gold,home,red,blue,green,3\n", "swag.csv"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_tfrecord_batches_equal_batches_read_from_the_task_files(case, tmp_path):
  experiment = _experiment(tmp_path, *CASES[case])
  task = base.get_task(experiment)
  output = str(tmp_path / "out.tfrecord")
  meta = features.write_tfrecord(task.data_loader(experiment.eval_data), output)
  assert json.load(open(output + ".json"))["num_examples"] == meta["num_examples"] >= 2
  from_files = next(iter(task.data_loader(experiment.eval_data).dataset()))
  from_records = next(iter(task.data_loader(experiment.eval_data.replace(
      format="tfrecord", input_path=output)).dataset()))
  assert set(from_files) == set(from_records)
  for key in from_files:
    np.testing.assert_array_equal(from_records[key].numpy(), from_files[key].numpy(), key)


def test_interrupted_writing_leaves_no_output(tmp_path):
  def broken():
    yield {constants.INPUT_WORD_IDS: np.array([2, 3], np.int32)}
    raise RuntimeError("interrupted")

  ds = tf.data.Dataset.from_generator(
      broken, output_signature={constants.INPUT_WORD_IDS: tf.TensorSpec([None], tf.int32)})
  with pytest.raises(Exception, match="interrupted"):
    tfrecords.write_finetuning_tfrecord(ds, str(tmp_path / "out.tfrecord"),
                                        record_specs.encoder_inputs((8,)), dict, {})
  assert os.listdir(tmp_path) == []


@pytest.mark.slow  # the tool in a process
def test_tool_writes_the_file_and_prints_a_summary(tmp_path):
  vocab = helpers.write_vocab(tmp_path / "vocab.txt")
  train = tmp_path / "train.tsv"
  train.write_text("sentence\tlabel\nthe cat sat \t1\nbad movie \t0\n")
  output = tmp_path / "sst2.tfrecord"
  override = (f"train_data.input_path={train},tokenizer.vocab_file={vocab},"
              "train_data.seq_length=16")
  result = subprocess.run(
      [sys.executable, os.path.join(ROOT, "tools", "create_finetuning_data.py"),
       "--experiment=glue_sst2", "--split=train", f"--params_override={override}",
       f"--output={output}"], capture_output=True, text=True, cwd=ROOT, timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
  assert "Wrote 2 sentence_prediction examples" in result.stdout
  assert sum(1 for _ in tf.data.TFRecordDataset(str(output))) == 2


UNLABELLED = {
    "sentence": "index\tsentence1\tsentence2\n0\tthe cat sat\ton the mat\n",
    "tagging": "John\nplaying\n\nParis\n",
    "choice": ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,"
              "ending3\n0,v,1,s,a man walks,the,gold,dog,cat sat on the mat,man,home\n",
}


@pytest.mark.parametrize("case", sorted(UNLABELLED))
def test_a_task_file_without_labels_is_refused_in_one_line_naming_file_and_line(
    case, tmp_path):
  task_section, fmt, _, name = CASES[case]
  experiment = _experiment(tmp_path, task_section, fmt, UNLABELLED[case], name)
  task = base.get_task(experiment)
  reads = {"the checks before training": lambda loader: loader.check_files(),
           "the TensorFlow engine's input": lambda loader: loader.dataset(),
           "the JAX engine's input": lambda loader: loader.host_batches(),
           "create_finetuning_data": lambda loader: features.write_tfrecord(
               loader, str(tmp_path / "out.tfrecord"))}
  for what, read in reads.items():
    with pytest.raises(glue.GlueFormatError) as raised:
      read(task.data_loader(experiment.train_data))
    message = str(raised.value)
    assert message.startswith(f"{tmp_path / name}:1: "), (what, message)
    assert "needs its labels" in message and "\n" not in message, (what, message)
  assert not os.path.exists(tmp_path / "out.tfrecord")
