"""The Beam pipeline of create_pretraining_data against the local tool, byte for byte.

Runs Beam's DirectRunner (in memory, and with two worker processes); skipped where the
`beam` extra is not installed.
"""

import glob
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("apache_beam", reason="needs the beam extra: pip install 'bert_tf[beam]'")

import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

import pretraining_fixtures as fx  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.data.creation import beam_pretraining  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.data.creation import create_pretraining_data as cpd  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.data.creation import pretraining_chunks  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.data.records import pretraining_format  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.data.creation import pretraining_instances as pi  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.data.creation import pretraining_plan  # pylint: disable=g-import-not-at-top,wrong-import-position
import paths

SETTINGS = pretraining_format.PretrainingDataSettings(max_seq_length=128,
                                                      max_predictions_per_seq=20, dupe_factor=2)
CHUNK_MB = 0.02
IN_MEMORY = ["--direct_running_mode=in_memory"]
REPO = paths.ROOT
# Counts that are a function of the instances, so equal between the two paths.
_SAME_KEYS = ("instances", "tokens", "non_special_tokens", "masked_tokens", "documents",
              "sentences", "lines", "input_bytes", "chunks", "max_token_id",
              "masked_outcome_fractions", "next_sentence_random_fraction",
              "short_target_document_pass_fraction", "truncated_instance_fraction",
              "feature_names", "settings", "vocab_sha256")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  """A vocab and 400 generated documents in two files (about ten 20 KB chunks)."""
  d = tmp_path_factory.mktemp("corpus")
  return {"vocab": fx.write_vocab(d),
          "text": ",".join([
              fx.write_text(d, fx.random_text(250, seed=1, min_sentences=4, max_sentences=20),
                            name="a.txt"),
              fx.write_text(d, fx.random_text(150, seed=2, min_sentences=1, max_sentences=8),
                            name="b.txt")])}


def _local(corpus, out, num_shards, gzip=False):
  return cpd.create_pretraining_data(corpus["text"], corpus["vocab"], out, SETTINGS,
                                     num_shards=num_shards, num_workers=1, gzip=gzip,
                                     chunk_size_mb=CHUNK_MB, progress=False)


@pytest.fixture(scope="module")
def local(corpus, tmp_path_factory):
  """The local tool's run with 3 shards."""
  return _local(corpus, str(tmp_path_factory.mktemp("local") / "pretrain"), 3)


def _contents(paths):
  out = []
  for p in paths:
    with open(p, "rb") as f:
      out.append(f.read())
  return out


def _records(paths, compression=""):
  return [[r.numpy() for r in tf.data.TFRecordDataset(p, compression_type=compression)]
          for p in paths]


def _run_beam(corpus, out, pipeline_args, **kwargs):
  kwargs.setdefault("num_shards", 3)
  return beam_pretraining.create_pretraining_data(
      corpus["text"], corpus["vocab"], out, SETTINGS, chunk_size_mb=CHUNK_MB,
      runner="DirectRunner", pipeline_args=pipeline_args, **kwargs)


def test_in_memory_runner_writes_the_local_tools_instances_and_summary(corpus, local,
                                                                       tmp_path):
  summary = _run_beam(corpus, str(tmp_path / "pretrain"), IN_MEMORY)
  assert summary["chunks"] > 5
  assert sorted(os.listdir(tmp_path)) == [
      "pretrain-00000-of-00003.tfrecord", "pretrain-00001-of-00003.tfrecord",
      "pretrain-00002-of-00003.tfrecord", "pretrain.json"]
  with open(tmp_path / "pretrain.json") as f:
    assert json.load(f) == summary
  assert summary["runner"] == "DirectRunner" and local["runner"] == "local"
  for key in _SAME_KEYS:
    assert summary[key] == local[key], key
  # The same files, byte for byte, each record in the same shard and place.
  assert all(_records(local["output_files"]))
  assert _contents(summary["output_files"]) == _contents(local["output_files"])
  # The original's rates: 15% of the non-special tokens, 80/10/10, NSP about 50/50 (a
  # one-sentence chunk always takes a random B, hence the share above one half).
  assert abs(summary["masked_fraction_of_non_special"] - 0.15) < 0.01
  fractions = summary["masked_outcome_fractions"]
  assert abs(fractions[pi.MASKED] - 0.8) < 0.01
  assert abs(fractions[pi.RANDOM] - 0.1) < 0.01
  assert abs(fractions[pi.KEPT] - 0.1) < 0.01
  expected_random = 0.5 + 0.5 * summary["single_sentence_chunk_fraction"]
  assert abs(summary["next_sentence_random_fraction"] - expected_random) < 0.02


def test_two_worker_processes_write_the_same_gzipped_files(corpus, local, tmp_path):
  gzipped = _local(corpus, str(tmp_path / "local" / "pretrain"), 4, gzip=True)
  summary = _run_beam(corpus, str(tmp_path / "beam" / "pretrain"),
                      ["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
                      num_shards=4, gzip=True)
  assert all(p.endswith(".tfrecord.gz") for p in summary["output_files"])
  assert summary["compression_type"] == "GZIP"
  assert _contents(summary["output_files"]) == _contents(gzipped["output_files"])
  assert (sorted(sum(_records(summary["output_files"], "GZIP"), [])) ==
          sorted(sum(_records(local["output_files"]), [])))


def test_single_file_output_keeps_its_name(corpus, tmp_path):
  out = str(tmp_path / "beam" / "all.tfrecord")
  summary = _run_beam(corpus, out, IN_MEMORY, num_shards=1)
  assert summary["output_files"] == [out]
  assert sorted(os.listdir(tmp_path / "beam")) == ["all.json", "all.tfrecord"]
  single = _local(corpus, str(tmp_path / "local" / "all.tfrecord"), 1)
  assert _contents([out]) == _contents(single["output_files"])


def test_shards_beyond_the_chunks_are_written_empty(corpus, tmp_path, capsys):
  beam_run = _run_beam(corpus, str(tmp_path / "beam" / "p"), IN_MEMORY, num_shards=40)
  assert "of the 40 shards stay empty" in capsys.readouterr().err
  local_run = _local(corpus, str(tmp_path / "local" / "p"), 40)
  assert beam_run["chunks"] < 40
  written = _contents(beam_run["output_files"])
  assert written == _contents(local_run["output_files"]) and written[-1] == b""


def test_slots_inside_a_long_document_are_empty_on_the_workers_too(corpus, tmp_path):
  # One 65 KB document between short ones: with 20 KB slots, two slots fall inside it.
  text = (fx.random_text(30, seed=3) + "\n" + fx.random_text(1, seed=4, min_sentences=1500,
                                                              max_sentences=1500)
          + "\n" + fx.random_text(30, seed=5))
  long_doc = {**corpus, "text": fx.write_text(tmp_path, text, name="long.txt")}
  beam_run = _run_beam(long_doc, str(tmp_path / "beam" / "p"), IN_MEMORY)
  slots = pretraining_plan.num_slots(len(text.encode()), beam_run["chunk_bytes"])
  local_run = _local(long_doc, str(tmp_path / "local" / "p"), 3)
  assert beam_run["chunks"] == local_run["chunks"] < slots
  assert _contents(beam_run["output_files"]) == _contents(local_run["output_files"])


def test_bad_input_gives_the_local_tools_errors_before_the_pipeline(corpus, tmp_path):
  out = str(tmp_path / "o")
  with pytest.raises(pretraining_format.PretrainingDataError, match="nothing_here"):
    _run_beam({**corpus, "text": str(tmp_path / "nothing_here*.txt")}, out, IN_MEMORY)
  with pytest.raises(pretraining_format.PretrainingDataError, match="no_vocab.txt"):
    _run_beam({**corpus, "vocab": str(tmp_path / "no_vocab.txt")}, out, IN_MEMORY)
  empty = fx.write_text(tmp_path, "\n\n  \n", name="blank.txt")
  with pytest.raises(pretraining_format.PretrainingDataError, match="No documents.*blank.txt"):
    _run_beam({**corpus, "text": empty}, out, IN_MEMORY)
  assert not glob.glob(out + "*")
  with open(out + ".json", "w") as f:
    f.write("{}")
  with pytest.raises(pretraining_format.PretrainingDataError, match="--overwrite"):
    _run_beam(corpus, out, IN_MEMORY)


def test_failed_pipeline_leaves_no_complete_looking_output(corpus, tmp_path, monkeypatch):
  original = pretraining_chunks.chunk_records

  def failing(chunk, *args):
    if chunk.index == 3:
      raise pretraining_format.PretrainingDataError(f"{chunk.path}: made to fail")
    return original(chunk, *args)

  monkeypatch.setattr(pretraining_chunks, "chunk_records", failing)
  with pytest.raises(pretraining_format.PretrainingDataError, match="made to fail"):
    _run_beam(corpus, str(tmp_path / "o"), IN_MEMORY)
  assert not [n for n in os.listdir(tmp_path) if n.startswith("o")]


def test_tool_runs_the_pipeline_with_beam_options_after_a_double_dash(corpus, local, tmp_path):
  out = str(tmp_path / "pretrain")
  tool = [sys.executable, os.path.join(REPO, "tools", "create_pretraining_data.py"),
          f"--input_file={corpus['text']}", f"--vocab_file={corpus['vocab']}",
          f"--output={out}", "--seq_length=128", "--max_predictions_per_seq=20",
          "--dupe_factor=2", f"--chunk_size_mb={CHUNK_MB}", "--num_shards=3"]
  env = {**os.environ, "PYTHONPATH": REPO}
  run = subprocess.run(tool + ["--runner=DirectRunner", "--"] + IN_MEMORY, env=env,
                       capture_output=True, text=True, check=False)
  assert run.returncode == 0, run.stderr
  assert f"Wrote {local['instances']:,} instances" in run.stdout
  assert _contents(sorted(glob.glob(out + "-*.tfrecord"))) == _contents(local["output_files"])
  refused = subprocess.run(tool + ["--overwrite", "--"] + IN_MEMORY, env=env,
                           capture_output=True, text=True, check=False)
  assert refused.returncode != 0 and "need --runner" in refused.stderr
