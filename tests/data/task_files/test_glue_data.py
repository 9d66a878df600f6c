"""GLUE TSV, generic TSV/CSV and TFDS readers, and sentence(-pair) features."""

import numpy as np
import pytest

import finetuning_helpers as helpers
from bert_tf import configs
from bert_tf import constants
from bert_tf.data.pipelines import featurizers
from bert_tf.data.pipelines.loaders import sentence
from bert_tf.data.task_files import glue


def _write(tmp_path, name, text, encoding="utf-8"):
  path = tmp_path / name
  path.write_bytes(text.encode(encoding))
  return str(path)


def test_cola_without_header_reads_label_and_sentence_columns(tmp_path):
  path = _write(tmp_path, "train.tsv", "gj04\t1\t\tThe cat sat.\ngj04\t0\t*\tCat the sat.")
  examples = glue.read_glue_tsv(path, "cola")
  assert [(e.index, e.text_a, e.text_b, e.label) for e in examples] == [
      (0, "The cat sat.", None, "1"), (1, "Cat the sat.", None, "0")]


def test_cola_test_file_with_index_header_is_unlabelled(tmp_path):
  path = _write(tmp_path, "test.tsv", "index\tsentence\n7\tThe cat sat.\n")
  [example] = glue.read_glue_tsv(path, "cola")
  assert (example.index, example.text_a, example.label) == (7, "The cat sat.", None)


def test_mrpc_reads_byte_order_mark_and_keeps_quotes(tmp_path):
  text = ("\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
          "1\t11\t12\t\"He said it.\tHe said \"it\".\n")
  [example] = glue.read_glue_tsv(_write(tmp_path, "dev.tsv", text), "mrpc")
  assert (example.text_a, example.text_b, example.label) == ("\"He said it.", "He said \"it\".",
                                                              "1")


def test_sst2_rte_mnli_qnli_layouts_pick_the_right_columns(tmp_path):
  sst = glue.read_glue_tsv(_write(tmp_path, "sst.tsv", "sentence\tlabel\ngood movie \t1\n"),
                           "sst2")
  assert (sst[0].text_a, sst[0].label) == ("good movie ", "1")
  rte = glue.read_glue_tsv(_write(tmp_path, "rte.tsv", "index\tsentence1\tsentence2\tlabel\n"
                                  "3\tA.\tB.\tnot_entailment\n"), "rte")
  assert (rte[0].index, rte[0].text_a, rte[0].text_b, rte[0].label) == (
      3, "A.", "B.", "not_entailment")
  header = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
            "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
            "sentence2", "label1", "gold_label"]
  row = ["0", "1", "1e", "gov", "(", "(", "(", "(", "P.", "H.", "neutral", "neutral"]
  mnli = glue.read_glue_tsv(_write(tmp_path, "dev_matched.tsv", "\t".join(header) + "\n" +
                                   "\t".join(row) + "\n"), "mnli_matched")
  assert (mnli[0].text_a, mnli[0].text_b, mnli[0].label) == ("P.", "H.", "neutral")
  qnli = glue.read_glue_tsv(_write(tmp_path, "qnli.tsv", "index\tquestion\tsentence\n"
                                   "5\tWho?\tHim.\n"), "qnli")
  assert (qnli[0].index, qnli[0].text_a, qnli[0].text_b, qnli[0].label) == (5, "Who?", "Him.",
                                                                            None)


def test_stsb_scores_are_floats_and_out_of_range_is_an_error_naming_the_line(tmp_path):
  header = ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
            "\tscore\n")
  ok = _write(tmp_path, "ok.tsv", header + "0\tg\tf\t2012\t1\tn\tn\tA.\tB.\t3.800\n")
  assert glue.read_glue_tsv(ok, "stsb")[0].label == pytest.approx(3.8)
  bad = _write(tmp_path, "bad.tsv", header + "0\tg\tf\t2012\t1\tn\tn\tA.\tB.\t3.8\n"
               "1\tg\tf\t2012\t1\tn\tn\tA.\tB.\t5.5\n")
  with pytest.raises(glue.GlueFormatError, match=r"bad.tsv:3: score 5.5 is outside"):
    glue.read_glue_tsv(bad, "stsb")


def test_unknown_label_and_wrong_column_count_are_errors_naming_file_and_line(tmp_path):
  path = _write(tmp_path, "rte.tsv", "index\tsentence1\tsentence2\tlabel\n0\tA\tB\tmaybe\n")
  with pytest.raises(glue.GlueFormatError, match=r"rte.tsv:2: unknown label 'maybe'"):
    glue.read_glue_tsv(path, "rte")
  path = _write(tmp_path, "sst.tsv", "sentence\tlabel\ngood\t1\nbad\t0\textra\n")
  with pytest.raises(glue.GlueFormatError, match=r"sst.tsv:3: expected 2 .*found 3"):
    glue.read_glue_tsv(path, "sst2")


def test_qqp_skips_and_counts_malformed_rows(tmp_path, caplog):
  text = ("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
          "0\t1\t2\tWhy?\tHow?\t0\n"
          "1\t3\t4\tbroken row\n"
          "2\t5\t6\tWhat?\tWhich?\t1\n")
  examples = glue.read_glue_tsv(_write(tmp_path, "qqp.tsv", text), "qqp")
  assert [e.label for e in examples] == ["0", "1"]
  assert "skipped 1 malformed rows" in caplog.text


def test_generic_csv_reads_quoted_fields_by_column_name(tmp_path):
  text = 'id,text,label\n4,"Hello, world",pos\n5,"He said ""hi""",neg\n'
  examples = glue.read_labelled_table(_write(tmp_path, "data.csv", text), label_names=(
      "neg", "pos"), index_column="id")
  assert [(e.index, e.text_a, e.label) for e in examples] == [
      (4, "Hello, world", "pos"), (5, 'He said "hi"', "neg")]


def test_generic_tsv_pair_and_missing_column_error(tmp_path):
  path = _write(tmp_path, "d.tsv", "premise\thypothesis\tlabel\nA\tB\tx\n")
  [e] = glue.read_labelled_table(path, "premise", "hypothesis")
  assert (e.text_a, e.text_b, e.label) == ("A", "B", "x")
  with pytest.raises(glue.GlueFormatError, match="no column 'sentence'"):
    glue.read_labelled_table(path, "sentence")


def test_a_table_to_train_on_without_its_label_column_is_refused_naming_file_and_line(
    tmp_path):
  path = _write(tmp_path, "d.csv", "text,other\nA,B\n")
  data = configs.DataConfig(format="csv", input_path=path)
  with pytest.raises(glue.GlueFormatError) as raised:
    glue.read_sentence_files(data, {"label_column": "label", "label_names": ("0", "1")})
  assert str(raised.value) == (f"{path}:1: header ['text', 'other'] has no label column "
                               "'label'; a file to train or evaluate on needs its labels")


def test_sentence_pair_features_pack_cls_a_sep_b_sep_and_shorten_the_longer(tmp_path):
  vocab = helpers.write_vocab(tmp_path / "vocab.txt")
  ids = helpers.vocab_ids(vocab)
  tokenizer = featurizers.PieceTokenizer(vocab)
  examples = [glue.SentenceExample(0, "the cat sat on the mat", "good movie", "1")]
  [features] = list(sentence.sentence_dataset(examples, tokenizer, 9, [1], False).as_numpy_iterator())
  expect = ["[CLS]", "the", "cat", "sat", "on", "[SEP]", "good", "movie", "[SEP]"]
  assert features[constants.INPUT_WORD_IDS].tolist() == [ids[t] for t in expect]
  assert features[constants.INPUT_TYPE_IDS].tolist() == [0] * 6 + [1] * 3
  assert features[constants.LABEL_IDS] == 1


def test_batches_are_padded_to_their_longest_example(tmp_path):
  tokenizer = featurizers.PieceTokenizer(helpers.write_vocab(tmp_path / "vocab.txt"))
  examples = [glue.SentenceExample(i, text, None, "0") for i, text in
              enumerate(["the cat", "the cat sat on the mat", "dog"])]
  ds = sentence.sentence_dataset(examples, tokenizer, 32, [0, 0, 0], False)
  [batch] = list(helpers.padded_batches(ds, "sentence", 3, False).as_numpy_iterator())
  assert batch[constants.INPUT_WORD_IDS].shape == (3, 8)
  np.testing.assert_array_equal(batch[constants.INPUT_MASK].sum(axis=1), [4, 8, 3])


def test_tfds_glue_maps_class_ids_to_glue_label_names():
  tfds = pytest.importorskip(
      "tensorflow_datasets", reason='needs the tfds extra: pip install "bert_tf[tfds]"')
  from bert_tf.data.task_files import tfds_glue
  with tfds.testing.mock_data(num_examples=6):
    examples = tfds_glue.read_tfds_glue("glue/rte", "train")
    mnli = tfds_glue.read_tfds_glue("glue/mnli", "validation_matched")
  assert len(examples) == 6
  assert all(e.label in ("entailment", "not_entailment") for e in examples)
  assert all(isinstance(e.text_a, str) and isinstance(e.text_b, str) for e in examples)
  assert all(e.label in glue.GLUE_TASKS["mnli"].label_names for e in mnli)


def test_a_tfds_split_without_labels_is_refused_naming_the_split_and_row():
  tfds = pytest.importorskip(
      "tensorflow_datasets", reason='needs the tfds extra: pip install "bert_tf[tfds]"')
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.data.task_files import tfds_glue  # pylint: disable=g-import-not-at-top

  def test_split(*_, **__):  # as GLUE's test splits are: label -1
    return tf.data.Dataset.from_tensor_slices(
        {"sentence": [b"a", b"b"], "label": [1, -1], "idx": [0, 1]})

  data = configs.DataConfig(format="tfds", tfds_name="glue/sst2", tfds_split="test")
  with tfds.testing.mock_data(as_dataset_fn=test_split):
    assert [e.label for e in tfds_glue.read_tfds_glue("glue/sst2", "test")] == ["1", None]
    with pytest.raises(glue.GlueFormatError) as raised:
      tfds_glue.read_tfds_section(data, {})
  assert str(raised.value) == ("glue/sst2 split test: row 1 has no label (-1); a file to "
                               "train or evaluate on needs its labels")
