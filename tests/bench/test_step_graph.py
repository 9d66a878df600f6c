"""The op census of bench/step_graph_worker.py (every call of a nested function counted,
the ops of XLA-compiled functions apart) and the comparison bench/step_graph.py prints
from two censuses."""

import tensorflow as tf

from bench import step_graph_worker
import bench_helpers

step_graph = bench_helpers.import_without_flags("step_graph")


def _traced_graph():
  @tf.function
  def scale(x):
    return x * 2.0

  @tf.function(jit_compile=True)
  def compiled(x):
    return tf.nn.relu(x) + 1.0

  @tf.function
  def step(x):
    return compiled(scale(scale(x)))

  return step.get_concrete_function(tf.TensorSpec([3], tf.float32)).graph.as_graph_def()


def test_census_counts_a_function_at_each_call_and_xla_compiled_ops_apart():
  counts = step_graph_worker.census(_traced_graph())
  assert counts["Mul"] == 2  # scale, called twice
  assert counts[step_graph_worker.XLA_PREFIX + "Relu"] == 1
  assert counts[step_graph_worker.XLA_PREFIX + "AddV2"] == 1
  assert "Relu" not in counts and "AddV2" not in counts


def test_differences_name_each_changed_op_type_largest_change_first():
  ours = {"MatMul": 10, "Cast": 4, "xla:Add": 2}
  baseline = {"MatMul": 10, "Cast": 1, "Transpose": 1, "xla:Add": 2}
  assert step_graph.differences(ours, baseline) == [("Cast", 1, 4), ("Transpose", 1, 0)]
  text = step_graph.report("mini", ours, baseline)
  assert "2 op types differ" in text and "| Cast | 1 | 4 | +3 |" in text


def test_report_of_equal_censuses_says_every_count_is_the_same():
  counts = {"MatMul": 10, "xla:Add": 2}
  assert step_graph.differences(counts, dict(counts)) == []
  assert step_graph.report("mini", counts, dict(counts)).endswith(
      "the same count of every op type")
