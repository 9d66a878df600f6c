"""End-to-end pretraining data creation: files, summary, determinism, workers, bad input."""

import glob
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import pretraining_fixtures as fx
from bert_tf import configs
from bert_tf import constants
from bert_tf.data.creation import create_pretraining_data as cpd
from bert_tf.data.records import example_encoding
from bert_tf.data.creation import pretraining_chunks
from bert_tf.data.records import pretraining_files
from bert_tf.data.records import pretraining_format
from bert_tf.data.creation import pretraining_inputs
from bert_tf.data.creation import pretraining_plan
from bert_tf.data.pipelines import pretraining_reader
from bert_tf.data.creation import pretraining_summary
import paths

SETTINGS = pretraining_format.PretrainingDataSettings(max_seq_length=128,
                                                      max_predictions_per_seq=20, dupe_factor=2)
REPO = paths.ROOT


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  """A vocab and 1,000 documents of generated text (several chunks of 128 KB)."""
  d = tmp_path_factory.mktemp("corpus")
  return {"vocab": fx.write_vocab(d),
          "text": fx.write_text(d, fx.random_text(1000, seed=1, min_sentences=4,
                                                  max_sentences=20))}


@pytest.fixture(scope="module")
def created(corpus, tmp_path_factory):
  out = str(tmp_path_factory.mktemp("out") / "pretrain")
  summary = cpd.create_pretraining_data(corpus["text"], corpus["vocab"], out, SETTINGS,
                                        num_shards=3, chunk_size_mb=0.125, progress=False)
  return out, summary


def _records(paths, compression=""):
  out = []
  for p in paths:
    out.extend(r.numpy() for r in tf.data.TFRecordDataset(p, compression_type=compression))
  return out


def test_features_have_the_original_names_dtypes_and_padded_shapes(created):
  _, summary = created
  record = _records(summary["output_files"][:1])[0]
  feature = tf.train.Example.FromString(record).features.feature
  assert set(feature) == set(constants.TFRECORD_TO_MODEL_INPUT)
  for name in (constants.TFRECORD_INPUT_IDS, constants.TFRECORD_INPUT_MASK,
               constants.TFRECORD_SEGMENT_IDS):
    assert len(feature[name].int64_list.value) == 128
  for name in (constants.TFRECORD_MASKED_LM_POSITIONS, constants.TFRECORD_MASKED_LM_IDS):
    assert len(feature[name].int64_list.value) == 20
  assert len(feature[constants.TFRECORD_MASKED_LM_WEIGHTS].float_list.value) == 20
  assert len(feature[constants.TFRECORD_NEXT_SENTENCE_LABELS].int64_list.value) == 1
  ids = list(feature[constants.TFRECORD_INPUT_IDS].int64_list.value)
  n = sum(feature[constants.TFRECORD_INPUT_MASK].int64_list.value)
  assert ids[0] == fx.VOCAB.index(constants.CLS_TOKEN)
  assert ids[n - 1] == fx.VOCAB.index(constants.SEP_TOKEN)
  assert all(i == 0 for i in ids[n:])


def test_summary_statistics_match_the_original_rates(created):
  _, summary = created
  assert summary["instances"] > 3000
  assert abs(summary["masked_fraction_of_non_special"] - 0.15) < 0.01
  fractions = summary["masked_outcome_fractions"]
  assert abs(fractions["mask"] - 0.8) < 0.02
  assert abs(fractions["random"] - 0.1) < 0.02
  assert abs(fractions["kept"] - 0.1) < 0.02
  # Chunks of one sentence always take a random B (as in the original).
  assert abs(summary["next_sentence_random_fraction"] - 0.5
             - 0.5 * summary["single_sentence_chunk_fraction"]) < 0.03
  assert abs(summary["short_target_document_pass_fraction"] - 0.1) < 0.03
  assert summary["vocab_size"] == len(fx.VOCAB)
  assert summary["settings"]["dupe_factor"] == 2
  assert len(summary["vocab_sha256"]) == 64


def test_a_small_input_is_cut_finer_so_that_no_shard_is_empty(corpus, tmp_path, capsys):
  # 80 short documents (a few KB) over 2 shards: at the nominal 4 MB one chunk would leave
  # the second shard empty; the grid is cut finer instead, no finer than 16 KB.
  small = fx.write_text(tmp_path, fx.random_text(80, seed=7, min_sentences=4,
                                                 max_sentences=20), name="small.txt")
  size = os.path.getsize(small)
  assert pretraining_plan.chunk_bytes(4.0, size, 2) < size < 4 << 20
  summary = cpd.create_pretraining_data(small, corpus["vocab"], str(tmp_path / "p"), SETTINGS,
                                        num_shards=2, progress=True)
  assert "stay empty" not in capsys.readouterr().err
  assert all(_records([p]) for p in summary["output_files"])
  # A large input keeps the nominal size, and no chunk is ever cut below 16 KB.
  assert pretraining_plan.chunk_bytes(4.0, 1 << 30, 8) == 4 << 20
  assert pretraining_plan.chunk_bytes(4.0, 1000, 8) == 16 << 10


def test_summary_times_the_start_up_apart_from_the_work(created):
  _, summary = created
  assert 0 < summary["startup_seconds"] < summary["seconds"]
  assert summary["instances_per_second_after_startup"] > summary["instances_per_second"]
  assert 0 < summary["work_cpu_seconds"] < summary["seconds"] * os.cpu_count()
  assert summary["work_cpu_seconds_per_worker"] == [summary["work_cpu_seconds"]]


def test_shard_i_holds_the_chunks_i_mod_num_shards_in_order(corpus, created):
  out, summary = created
  with open(pretraining_format.summary_path(out)) as f:
    assert json.load(f)["instances"] == summary["instances"]
  assert summary["chunk_bytes"] == pretraining_plan.chunk_bytes(
      0.125, os.path.getsize(corpus["text"]), 3)
  chunks = pretraining_plan.plan_chunks([corpus["text"]], summary["chunk_bytes"])
  assert len(chunks) == summary["chunks"] > 3
  special = pretraining_inputs.load_special_ids(corpus["vocab"])
  tokenize = pretraining_chunks.make_line_tokenizer(corpus["vocab"], True)
  expected = [[], [], []]
  for chunk in chunks:
    for records in pretraining_chunks.chunk_records(chunk, SETTINGS, special, tokenize,
                                                    pretraining_summary.empty_stats()):
      expected[chunk.index % 3].extend(records)
  assert [_records([p]) for p in summary["output_files"]] == expected
  assert not glob.glob(out + "*" + pretraining_format.INCOMPLETE_SUFFIX)


def test_written_files_parse_with_the_reader(created):
  out, summary = created
  config = configs.DataConfig(input_path=out + "-*.tfrecord", global_batch_size=16,
                              seq_length=128, max_predictions_per_seq=20, is_training=False)
  batch = next(iter(pretraining_reader.build_pretraining_dataset(config)))
  assert batch[constants.INPUT_WORD_IDS].shape == (16, 128)
  assert batch[constants.MASKED_LM_WEIGHTS].dtype == tf.float32
  info = pretraining_files.inspect_pretraining_files(out + "-*.tfrecord")
  assert (info.seq_length, info.max_predictions_per_seq) == (128, 20)
  assert info.vocab_size == len(fx.VOCAB) and info.summary["instances"] == summary["instances"]


def test_same_seed_gives_identical_files_and_another_seed_differs(corpus, created, tmp_path):
  _, summary = created
  again = cpd.create_pretraining_data(corpus["text"], corpus["vocab"], str(tmp_path / "a"),
                                      SETTINGS, num_shards=3, chunk_size_mb=0.125,
                                      progress=False)
  for p, q in zip(summary["output_files"], again["output_files"]):
    with open(p, "rb") as f, open(q, "rb") as g:
      assert f.read() == g.read()
  other = cpd.create_pretraining_data(
      corpus["text"], corpus["vocab"], str(tmp_path / "b"),
      pretraining_format.PretrainingDataSettings(max_seq_length=128, dupe_factor=2,
                                                 random_seed=7),
      num_shards=3, chunk_size_mb=0.125, progress=False)
  assert set(_records(other["output_files"])) != set(_records(summary["output_files"]))


def test_chunks_split_over_two_workers_make_the_same_files_as_one(corpus, tmp_path):
  settings = pretraining_format.PretrainingDataSettings(
      max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1)
  chunks = pretraining_plan.plan_chunks([corpus["text"]], 1 << 17)
  assert len(chunks) > 2
  files = {}
  for workers in (1, 2):
    paths = [str(tmp_path / f"w{workers}-{i}") for i in range(2)]
    for w in range(workers):
      cpd._run_worker(w, workers, chunks, paths, False, settings, corpus["vocab"],  # pylint: disable=protected-access
                      lambda _: None)
    files[workers] = []
    for p in paths:
      with open(p + pretraining_format.INCOMPLETE_SUFFIX, "rb") as f:
        files[workers].append(f.read())
  assert all(len(f) > 10_000 for f in files[1]) and files[1] == files[2]


@pytest.mark.slow
def test_two_worker_processes_write_the_same_instances_as_one(corpus, tmp_path):
  settings = pretraining_format.PretrainingDataSettings(
      max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1)
  runs = {}
  for workers in (1, 2):
    runs[workers] = cpd.create_pretraining_data(
        corpus["text"], corpus["vocab"], str(tmp_path / f"w{workers}"), settings,
        num_shards=2, num_workers=workers, chunk_size_mb=0.125, progress=False)
  assert runs[2]["num_workers"] == 2 and runs[2]["chunks"] > 2
  one, two = ([_records([p]) for p in runs[w]["output_files"]] for w in (1, 2))
  assert sum(map(len, one)) == runs[1]["instances"] and one == two


def test_gzip_output_reads_back_with_gzip_compression(corpus, tmp_path):
  settings = pretraining_format.PretrainingDataSettings(
      max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1)
  summary = cpd.create_pretraining_data(corpus["text"], corpus["vocab"], str(tmp_path / "g"),
                                        settings, gzip=True, progress=False)
  path = summary["output_files"][0]
  assert path.endswith(".tfrecord.gz") and summary["compression_type"] == "GZIP"
  with open(path, "rb") as f:
    assert f.read(2) == b"\x1f\x8b"
  assert len(_records([path], "GZIP")) == summary["instances"]


def test_whole_word_masking_masks_all_pieces_of_chosen_words(corpus, tmp_path):
  settings = pretraining_format.PretrainingDataSettings(
      max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1, do_whole_word_mask=True)
  summary = cpd.create_pretraining_data(corpus["text"], corpus["vocab"], str(tmp_path / "w"),
                                        settings, progress=False)
  special = fx.special_ids()
  whole_pieces = 0
  for record in _records(summary["output_files"])[:500]:
    f = tf.train.Example.FromString(record).features.feature
    weights = np.array(f[constants.TFRECORD_MASKED_LM_WEIGHTS].float_list.value)
    positions = np.array(f[constants.TFRECORD_MASKED_LM_POSITIONS].int64_list.value)
    labels = np.array(f[constants.TFRECORD_MASKED_LM_IDS].int64_list.value)
    ids = np.array(f[constants.TFRECORD_INPUT_IDS].int64_list.value)
    n = int(weights.sum())
    ids[positions[:n]] = labels[:n]  # Unmasked sequence.
    chosen = set(positions[:n].tolist())
    for p in positions[:n]:
      # The piece after a chosen one continues its word only if it is a "##" piece.
      if p + 1 < len(ids) and special.is_continuation[ids[p + 1]]:
        assert p + 1 in chosen
        whole_pieces += 1
  assert whole_pieces > 20


def test_invalid_utf8_is_replaced_counted_and_its_lines_named(corpus, tmp_path, capfd):
  path = str(tmp_path / "bad.txt")
  good = fx.random_text(60, seed=5).encode("utf-8")
  assert good.count(b"\n") > 400  # Two bad lines stay under 1%.
  with open(path, "wb") as f:
    f.write(b"The cat sat on the mat.\nThe dog \xff\xfe ran far.\n\n"
            b"A big red house.\nThe sky is blue \xc3.\nThe sun and the moon.\n\n" + good)
  capfd.readouterr()
  summary = cpd.create_pretraining_data(path, corpus["vocab"], str(tmp_path / "o"),
                                        SETTINGS, progress=False)
  assert summary["invalid_utf8_replacements"] == 3
  assert summary["instances"] > 0
  warning = [line for line in capfd.readouterr().err.splitlines() if "warning" in line]
  assert len(warning) == 1
  assert f"{path}: 2 line(s) not valid UTF-8 (lines 2, 5)" in warning[0]


@pytest.mark.parametrize("content, fragment", [
    (b"The cat sat.\nThe dog ran\x00 far.\n", "NUL byte at byte offset 24"),
    ("Caf\u00e9 ol\u00e9.\nThe cat sat.\n".encode("latin-1") * 50,
     "not a UTF-8 text file (50 of its 100 lines are not valid UTF-8, first at line(s) 1, 3"),
])
def test_a_file_that_is_not_text_is_an_error_naming_it(corpus, tmp_path, content, fragment):
  path = str(tmp_path / "binary.txt")
  with open(path, "wb") as f:
    f.write(content)
  # plan_run is the Beam pipeline's check too.
  with pytest.raises(pretraining_format.PretrainingDataError, match=re.escape(f"{path}: ")) as info:
    pretraining_plan.plan_run(f"{corpus['text']},{path}", corpus["vocab"], str(tmp_path / "o"),
                              SETTINGS, num_shards=1, gzip=False, overwrite=False,
                              chunk_size_mb=1.0)
  assert fragment in str(info.value)
  assert not glob.glob(str(tmp_path / "o*"))


def test_text_check_counts_lines_across_blocks(tmp_path, monkeypatch):
  monkeypatch.setattr(pretraining_inputs, "_TEXT_CHECK_BLOCK", 7)
  path = tmp_path / "t.txt"
  path.write_bytes(b"one line\nsecond \xff\nthird line is longer\n\nlast \xc3")
  with pytest.raises(pretraining_format.PretrainingDataError,
                     match=r"2 of its 5 lines are not valid UTF-8, first at line\(s\) 2, 5"):
    pretraining_inputs.check_text_file(str(path))
  path.write_bytes(b"one line\nsecond \xff\nthird line is longer\n" + b"ok\n" * 200)
  check = pretraining_inputs.check_text_file(str(path))
  assert (check.lines, check.invalid_lines, check.first_invalid) == (203, 1, [2])


@pytest.mark.parametrize("content", [b"", b"\n\n   \n\n"])
def test_empty_input_or_no_documents_is_an_error(corpus, tmp_path, content):
  path = str(tmp_path / "empty.txt")
  with open(path, "wb") as f:
    f.write(content)
  with pytest.raises(pretraining_format.PretrainingDataError, match="empty|No documents"):
    cpd.create_pretraining_data(path, corpus["vocab"], str(tmp_path / "o"), SETTINGS,
                                progress=False)
  assert not glob.glob(str(tmp_path / "o*"))


def test_unmatched_input_glob_is_an_error_naming_it(corpus, tmp_path):
  with pytest.raises(pretraining_format.PretrainingDataError, match="nothing_here"):
    cpd.create_pretraining_data(corpus["text"] + "," + str(tmp_path / "nothing_here*.txt"),
                                corpus["vocab"], str(tmp_path / "o"), SETTINGS,
                                progress=False)


def test_missing_vocab_is_an_error_naming_the_file(corpus, tmp_path):
  with pytest.raises(pretraining_format.PretrainingDataError, match="no_vocab.txt"):
    cpd.create_pretraining_data(corpus["text"], str(tmp_path / "no_vocab.txt"),
                                str(tmp_path / "o"), SETTINGS, progress=False)


def test_vocab_lacking_a_special_token_is_an_error_naming_it(corpus, tmp_path):
  vocab = fx.write_vocab(tmp_path, [t for t in fx.VOCAB if t != constants.SEP_TOKEN])
  with pytest.raises(pretraining_format.PretrainingDataError, match=r"\[SEP\]"):
    cpd.create_pretraining_data(corpus["text"], vocab, str(tmp_path / "o"), SETTINGS,
                                progress=False)


def test_existing_output_is_refused_without_overwrite(corpus, tmp_path):
  settings = pretraining_format.PretrainingDataSettings(max_seq_length=32, dupe_factor=1)
  out = str(tmp_path / "o")
  first = cpd.create_pretraining_data(corpus["text"], corpus["vocab"], out, settings,
                                      progress=False)
  with pytest.raises(pretraining_format.PretrainingDataError, match="--overwrite"):
    cpd.create_pretraining_data(corpus["text"], corpus["vocab"], out, settings,
                                progress=False)
  again = cpd.create_pretraining_data(corpus["text"], corpus["vocab"], out, settings,
                                      overwrite=True, progress=False)
  assert again["instances"] == first["instances"]


def test_failure_midway_leaves_no_complete_looking_file(corpus, tmp_path, monkeypatch):
  calls = {"n": 0}
  original = example_encoding.serialize_examples

  def failing(features):
    calls["n"] += 1
    if calls["n"] == 3:
      raise KeyboardInterrupt("interrupted")
    return original(features)

  monkeypatch.setattr(example_encoding, "serialize_examples", failing)
  with pytest.raises(KeyboardInterrupt):
    cpd.create_pretraining_data(corpus["text"], corpus["vocab"], str(tmp_path / "o"),
                                SETTINGS, num_shards=2, chunk_size_mb=0.125,
                                progress=False)
  assert calls["n"] == 3
  assert os.listdir(tmp_path) == []


def test_chunks_end_at_document_boundaries(corpus, tmp_path):
  chunks = pretraining_plan.plan_chunks([corpus["text"]], 10_000)
  assert len(chunks) > 5
  with open(corpus["text"], "rb") as f:
    data = f.read()
  assert chunks[0].start == 0 and chunks[-1].end == len(data)
  for a, b in zip(chunks, chunks[1:]):
    assert a.end == b.start and a.index < b.index
    assert data[:a.end].endswith(b"\n\n")
  # Each slot found alone (as Beam's workers do) is the same chunk.
  for chunk in chunks:
    assert pretraining_plan.file_chunks(corpus["text"], len(data), 0, 10_000,
                                        [chunk.index]) == [chunk]
  # A document longer than the nominal size stays whole: its slots are empty.
  long_doc = fx.write_text(tmp_path, "a b c\n" * 10_000 + "\nd e\n", name="long.txt")
  cut = pretraining_plan.plan_chunks([long_doc], 10_000)
  assert [c.index for c in cut] == [0, 5] and cut[1].start == 60_001


# The tool in a process of its own (TensorFlow's import, the whole corpus): 10-20 s each.
@pytest.mark.slow
def test_tool_runs_and_prints_a_one_line_summary(corpus, tmp_path):
  out = str(tmp_path / "tool")
  result = subprocess.run(
      [sys.executable, os.path.join(REPO, "tools", "create_pretraining_data.py"),
       f"--input_file={corpus['text']}", f"--vocab_file={corpus['vocab']}",
       f"--output={out}", "--seq_length=32", "--max_predictions_per_seq=5",
       "--dupe_factor=1"], capture_output=True, text=True, timeout=300,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert result.returncode == 0, result.stderr
  assert "Wrote" in result.stdout and "instances" in result.stdout
  assert re.search(r"instances [0-9,]+ \([0-9,.]+/s\)", result.stderr) and "ETA" in result.stderr
  assert os.path.exists(out + "-00000-of-00001.tfrecord") and os.path.exists(out + ".json")
  again = subprocess.run(
      [sys.executable, os.path.join(REPO, "tools", "create_pretraining_data.py"),
       f"--input_file={corpus['text']}", f"--vocab_file={corpus['vocab']}",
       f"--output={out}"], capture_output=True, text=True, timeout=300,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert again.returncode == 1 and "--overwrite" in again.stderr


@pytest.mark.slow
@pytest.mark.parametrize("names", [
    ("--seq_length=32", "--nolower_case", "--whole_word_masking"),
    ("--max_seq_length=32", "--nodo_lower_case", "--do_whole_word_mask")])
def test_tool_takes_the_config_names_and_the_original_tools_names(corpus, tmp_path, names):
  out = str(tmp_path / "tool")
  result = subprocess.run(
      [sys.executable, os.path.join(REPO, "tools", "create_pretraining_data.py"),
       f"--input_file={corpus['text']}", f"--vocab_file={corpus['vocab']}",
       f"--output={out}", "--max_predictions_per_seq=5", "--dupe_factor=1", "--noprogress",
       *names], capture_output=True, text=True, timeout=300,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert result.returncode == 0, result.stderr
  with open(out + ".json", encoding="utf-8") as f:
    summary = json.load(f)
  assert summary["seq_length"] == 32
  assert (summary["settings"]["max_seq_length"], summary["settings"]["do_lower_case"],
          summary["settings"]["do_whole_word_mask"]) == (32, False, True)
