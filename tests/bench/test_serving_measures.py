"""The serving benchmark's pure parts (bench/export_measures.py, the serving side of
bench/peers/protocol.py) and its rounds: workers fed the same arrays, interleaved."""

import os
import subprocess
import sys

import numpy as np
import pytest

from bench import driver
from bench import export_measures
from bench.peers import protocol

REPO_ROOT = __file__.rsplit("/tests/", 1)[0]


def _scores(difference=0.0, dev=None):
  reference = protocol.log_softmax(np.array([[0.5, -0.5], [1.0, 2.0], [0.0, 0.1]]))
  entry = {"agreement_log_probs": reference + difference}
  if dev is not None:
    entry["dev_log_probs"] = protocol.log_softmax(np.array(dev, np.float64))
  return entry


def test_log_softmax_is_the_log_of_the_softmax_and_ignores_a_shift_of_the_logits():
  logits = np.array([[1.0, 3.0, -2.0], [100.0, 101.0, 99.0]])
  expected = np.log(np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True))
  np.testing.assert_allclose(protocol.log_softmax(logits), expected, atol=1e-6)
  np.testing.assert_allclose(protocol.log_softmax(logits + 7.0), expected, atol=1e-6)


def test_summary_takes_speed_against_float32_round_by_round_and_the_p99_of_calls():
  rounds = {"float32": {1: [[0.010, 0.010]] * 5, 32: [[0.4]] * 5},
            "onnxruntime_float32": {1: [[0.020, 0.020]] * 5, 32: [[0.2]] * 5},
            "int8_onednn": {1: [[0.005] * 98 + [0.050] * 2] * 5, 32: [[0.1]] * 5}}
  summary = export_measures.serving_summary(
      rounds, {name: _scores() for name in rounds})
  assert summary["float32"]["batch1_ms"] == pytest.approx(10.0)
  assert summary["onnxruntime_float32"]["speed_vs_float32"][1]["ratio"] == pytest.approx(0.5)
  assert summary["onnxruntime_float32"]["speed_vs_float32"][32]["ratio"] == pytest.approx(2.0)
  assert summary["onnxruntime_float32"]["batch32_per_second"] == pytest.approx(160.0)
  assert summary["int8_onednn"]["batch1_ms"] == pytest.approx(5.0)
  assert summary["int8_onednn"]["batch1_p99_ms"] > 40.0


def test_a_float32_system_off_by_more_than_the_tolerance_is_not_the_same_model():
  rounds = {name: {1: [[0.01]], 32: [[0.1]]}
            for name in ("float32", "openvino_float32", "onnxruntime_optimized", "int8")}
  summary = export_measures.serving_summary(rounds, {
      "float32": _scores(), "openvino_float32": _scores(3e-5),
      "onnxruntime_optimized": _scores(1e-3), "int8": _scores(2e-2)})
  assert summary["openvino_float32"]["agrees"]
  assert summary["openvino_float32"]["max_log_prob_difference"] == pytest.approx(3e-5, rel=1e-2)
  assert not summary["onnxruntime_optimized"]["agrees"]
  # A quantized system reports its difference; it is not held to float32's tolerance.
  assert "agrees" not in summary["int8"]
  assert summary["int8"]["max_log_prob_difference"] == pytest.approx(2e-2, rel=1e-2)
  table = export_measures.summary_table(summary, {}, 32)
  assert "1.0e-03 (over 0.0001)" in table and "3.0e-05 |" in table


def test_dev_accuracy_counts_the_rows_whose_largest_log_probability_is_the_label():
  rounds = {"float32": {1: [[0.01]], 32: [[0.1]]}, "openvino_int8": {1: [[0.01]], 32: [[0.1]]}}
  labels = np.array([0, 1, 1, 0])
  summary = export_measures.serving_summary(rounds, {
      "float32": _scores(dev=[[2, 1], [0, 1], [0, 3], [5, 1]]),
      "openvino_int8": _scores(dev=[[2, 1], [1, 0], [0, 3], [1, 5]])}, labels)
  assert summary["float32"]["dev_accuracy"] == 100.0
  assert summary["openvino_int8"]["dev_accuracy"] == 50.0
  assert summary["openvino_int8"]["dev_examples"] == 4


def test_the_table_says_when_a_bf16_hint_ran_in_float32():
  rounds = {name: {1: [[0.01]], 32: [[0.1]]}
            for name in ("float32", "openvino_bf16", "openvino_int8")}
  summary = export_measures.serving_summary(rounds, {name: _scores() for name in rounds})
  summary["openvino_bf16"]["info"] = {"precision": "f32"}
  summary["openvino_int8"]["info"] = {"precision": "f32"}
  table = export_measures.summary_table(summary, {}, 32)
  assert "| openvino_bf16 | bf16 (ran f32) |" in table
  assert "| openvino_int8 | int8 |" in table


def test_each_export_is_compared_with_the_fastest_peer_of_its_own_precision():
  ms = {"float32": 10.0, "int8_onednn": 4.0, "bfloat16": 6.0, "int8": 9.0,
        "onnxruntime_float32": 12.0, "openvino_float32": 8.0,
        "onnxruntime_int8_dynamic": 5.0, "openvino_int8": 6.0}
  summary = {name: {"batch1_ms": value} for name, value in ms.items()}
  best = export_measures.best_peer_ratios(summary, 1)
  assert best["float32"] == {"peer": "openvino_float32", "ratio": pytest.approx(0.8)}
  assert best["int8_onednn"] == {"peer": "onnxruntime_int8_dynamic",
                                 "ratio": pytest.approx(1.25)}
  assert best["int8"]["peer"] == "onnxruntime_int8_dynamic"
  # No bf16 peer ran: bfloat16 has nothing of its precision to be compared with.
  assert "bfloat16" not in best and "openvino_int8" not in best


_FAKE_WORKER = """
import numpy as np
from bench.peers import protocol
args = protocol.serving_argument_parser('fake').parse_args()
protocol.serve_classifier(
    lambda ids, mask, types: np.stack([(ids * mask).sum(-1), types.sum(-1)], -1) / 100.0,
    args, {"framework": "numpy"})
"""


def test_workers_score_the_same_rows_then_take_turns_round_by_round(tmp_path):
  rng = np.random.default_rng(0)
  arrays = {}
  for name, rows in (("timing", 4), ("agreement", 3), ("dev", 5)):
    arrays[f"{name}_input_word_ids"] = rng.integers(5, 50, (rows, 6)).astype(np.int32)
    arrays[f"{name}_input_mask"] = np.ones((rows, 6), np.int32)
    arrays[f"{name}_input_type_ids"] = np.zeros((rows, 6), np.int32)
  inputs = str(tmp_path / "arrays.npz")
  np.savez(inputs, **arrays)
  workers = driver.start_sequential([
      (name, [sys.executable, "-c", _FAKE_WORKER, "--inputs", inputs, "--batch_size", "4",
              "--outputs", str(tmp_path / f"{name}.npz")], {}) for name in ("a", "b")])
  records = driver.alternate(workers, 3, 2, quiet_timeout=0)
  assert [r["order"] for r in records] == [["a", "b"], ["b", "a"], ["a", "b"]]
  assert all(len(w.rounds) == 3 and all(len(r) == 2 for r in w.rounds) for w in workers)
  a, b = (dict(np.load(tmp_path / f"{name}.npz")) for name in ("a", "b"))
  assert sorted(a) == ["agreement_log_probs", "dev_log_probs"]
  assert a["dev_log_probs"].shape == (5, 2)
  np.testing.assert_array_equal(a["agreement_log_probs"], b["agreement_log_probs"])
  expected = protocol.log_softmax(np.stack(
      [arrays["agreement_input_word_ids"].sum(-1) / 100.0, np.zeros(3)], -1))
  np.testing.assert_allclose(a["agreement_log_probs"], expected, atol=1e-6)
  assert not os.path.exists(tmp_path / "a.npz.partial.npz")


@pytest.mark.slow
def test_bert_tf_exports_of_a_hugging_face_classifier_agree_and_are_timed(tmp_path):
  """End to end without a peer venv: random weights written as Hugging Face, converted
  into bert_tf, exported in float32 and bf16, every export a worker of the rounds,
  scoring a GLUE dev file whose batches the reader pads to different lengths."""
  env = dict(os.environ, BERT_TF_BENCH_LOGS=str(tmp_path), OMP_NUM_THREADS="1")
  glue = tmp_path / "data" / "glue_sst2"
  glue.mkdir(parents=True)
  for split in ("train", "dev"):
    # 40 rows: a first batch of 32 short sentences, a second of 8 longer ones.
    rows = [f"{'good ' * (1 + i // 32 * 4)}film\t{i % 2}" for i in range(40)]
    (glue / f"{split}.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n")
  result = subprocess.run(
      [sys.executable, "-m", "bench.int8_serving", "--size=tiny", "--seq_length=16",
       "--batch_size=4", "--modes=bfloat16", "--rounds=2", "--iterations=2",
       "--batch_iterations=1", "--quiet_timeout=0", "--nowrite_readme",
       "--glue_task=sst2", f"--data_dir={tmp_path / 'data'}", "--calibration_rows=8"],
      cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  assert "| float32 | float32 |" in result.stdout
  assert "| bfloat16 | bf16 |" in result.stdout
