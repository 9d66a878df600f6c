"""The training step compiled ahead of time for accelerators this machine does not have
(bert_tf.training.jax_engine.compile_for, `bert-tf-train --compile_for=TARGET`): target
names, the batch search, and (marked slow, with the aot_tpu / aot_gpu extras installed)
the tiny model's step compiled for a TPU slice and a GPU node."""

import os
import subprocess
import sys

import pytest
import yaml

from bert_tf.training.jax_engine import compile_for
from bert_tf.training.jax_engine import compiled_report
from bert_tf.training.jax_engine import targets
from bert_tf.utils import errors
from bert_tf.utils import optional
import paths
import trainer_helpers

_HAS_LIBTPU = optional.installed("libtpu")
_HAS_CUDA_PLUGIN = optional.installed("jax_plugins.xla_cuda13")


@pytest.mark.parametrize("name,chips,topology", [
    ("tpu:v5e-16", 16, "v5e:4x4"),       # v5e counts chips
    ("tpu:v5p-64", 32, "v5p:2x4x4"),     # v5p and v4 count TensorCores, two per chip
    ("tpu:v4-32", 16, "v4:2x2x4"),
    ("tpu:2xv5e-256", 512, "v5e:16x16"),  # two slices
    ("tpu:v5e-256", 256, "v5e:16x16"),    # a whole v5e pod
    ("tpu:v4-8", 4, "v4:2x2x1"),          # one host
    ("tpu:2xv4-32", 32, "v4:2x2x4"),
    ("gpu:8xH100", 8, "1x1x8"),
    ("gpu:8xH200", 8, "1x1x8"),
    ("gpu:8xA100", 8, "1x1x8"),
    ("gpu:2x8xA100", 16, "1x2x8"),       # two hosts
    ("gpu:H200", 1, "1x1x1"),
])
def test_a_target_name_gives_its_chips_and_topology(name, chips, topology):
  target = targets.resolve(name)
  assert (target.chips, target.topology) == (chips, topology)
  assert target.memory_bytes > 0 and target.peak_flops > 0


@pytest.mark.parametrize("name", ["tpu:v9-8", "gpu:8xB300", "tpu:v5e-12", "gpu:9xH100",
                                  "cpu:4", ""])
def test_an_unknown_or_impossible_target_is_one_line_user_error(name):
  with pytest.raises(errors.UserError) as raised:
    targets.resolve(name)
  assert "\n" not in str(raised.value)


def test_a_tpu_target_without_libtpu_says_what_to_install(monkeypatch):
  monkeypatch.setattr(targets.optional, "installed", lambda name: name != "libtpu")
  with pytest.raises(targets.TargetError, match=r"libtpu is not installed: pip install "
                     r"'jax\[tpu\]'"):
    targets.resolve("tpu:v5e-8").devices()


@pytest.mark.parametrize("name,each_way", [
    ("tpu:v5e-256", 200e9), ("tpu:v5p-64", 300e9), ("gpu:8xH100", 450e9),
    ("gpu:8xA100", 300e9),
    ("tpu:v4-8", None),                         # Cloud gives v4's ICI per pod only
    ("tpu:2xv5e-16", None), ("gpu:2x8xH100", None),  # slices or hosts: the network too
])
def test_the_chip_to_chip_bandwidth_is_half_the_published_bidirectional_one(name, each_way):
  assert targets.resolve(name).interconnect_bandwidth == each_way


def test_every_gpu_of_the_data_file_has_a_target_config_with_its_figures():
  for model, figures in targets.accelerators()["gpu"].items():
    config = targets.gpu_target_config(figures)
    assert f"core_count: {figures['core_count']}" in config, model
    assert f"device_memory_size: {figures['device_memory_size']}" in config, model


class _LinearMemory(compile_for.Compiler):
  """A compiler whose step needs 1 GiB plus 10 MiB a row, out of 16 GiB."""

  def __init__(self):  # pylint: disable=super-init-not-called
    self.target = targets.resolve("tpu:v5e-16")
    self.compiled_sizes = []

  @property
  def batch_unit(self):
    return 16

  def compile(self, global_batch_size):
    self.compiled_sizes.append(global_batch_size)
    peak = 2**30 + global_batch_size * 10 * 2**20
    return compiled_report.Compiled(global_batch_size, peak, 0, 0, 0, 0, 0.0, 0.0, None, "",
                                    0.0)


def test_the_batch_search_finds_the_largest_fitting_batch_in_few_compiles():
  compiler = _LinearMemory()
  search = compiler.largest_batch(256, compiler.compile(256), 4, lambda _: None)
  # (16 GiB - 1 GiB) / 10 MiB = 1536 rows.
  assert search.largest == 1536
  assert search.compiles <= 4


_HLO = """
  %all-reduce.1 = f32[30522,128]{1,0} all-reduce(%fusion.4), metadata={op_name="jit(step)/transpose(jvp(embeddings))/scatter-add"}
  %all-reduce.52 = (f32[128,128]{1,0}, bf16[2,64]{1,0}) all-reduce(%a, %b), metadata={op_name="jit(step)/dot_general"}
  %all-gather.10 = f32[32,21,128]{2,0,1} all-gather(%param_0), metadata={op_name="jit(step)/transpose(jvp(transformer_layer_1))/jit(_take)/scatter-add"}
  %all-gather-done = f32[32,21,128]{2,0,1} all-gather-done(%all-gather-start)
  %cc = f32[2] custom-call(%x), custom_call_target="__cudnn$fmhaSoftmax"
"""


def test_collectives_are_counted_once_with_their_result_bytes_and_sources():
  found = compiled_report.collectives(_HLO)
  assert found["all-reduce"].count == 2
  assert found["all-reduce"].bytes == 30522 * 128 * 4 + 128 * 128 * 4 + 2 * 64 * 2
  assert found["all-gather"].count == 1
  assert list(found["all-gather"].sources) == ["transformer_layer_N/_take/scatter-add"]
  assert compiled_report.custom_calls(_HLO) == {"__cudnn$fmhaSoftmax": 1}


def test_the_all_reduce_estimate_is_a_rings_bytes_at_the_interconnect_bandwidth():
  compiled = compiled_report.Compiled(256, 0, 0, 0, 0, 0, 0.0, 0.0, None, _HLO, 0.0)
  for name, estimated in (("gpu:8xH100", True), ("gpu:2x8xH100", False)):
    report = compiled_report.Report(None, targets.resolve(name), compiled, None, None)
    reduced = 30522 * 128 * 4 + 128 * 128 * 4 + 2 * 64 * 2
    assert report.all_reduce_seconds() == (
        pytest.approx(2 * 7 / 8 * reduced / 450e9) if estimated else None)


def _compile(tmp_path, target, *flags):
  """tools/train.py --compile_for=TARGET on the tiny experiment (bfloat16, dropout), in
  a process of its own (this one runs Keras on TensorFlow): (exit code, output lines)."""
  experiment = trainer_helpers.tiny_experiment_dict(
      batch=8, strategy="mirrored", runtime=dict(mixed_precision_dtype="mixed_bfloat16"),
      model=dict(encoder=dict(dropout_rate=0.1, attention_dropout_rate=0.1)))
  path = tmp_path / "tiny.yaml"
  path.write_text(yaml.safe_dump(experiment))
  env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
  env["JAX_SKIP_CUDA_CONSTRAINTS_CHECK"] = "1"
  done = subprocess.run(
      [sys.executable, os.path.join(paths.ROOT, "tools", "train.py"), f"--experiment={path}",
       f"--compile_for={target}", *flags], env=env, capture_output=True, text=True,
      timeout=600, check=False)
  return done.returncode, done.stdout.splitlines() + done.stderr.splitlines()


def _line(lines, start):
  return next(line for line in lines if line.startswith(start))


@pytest.mark.slow
@pytest.mark.skipif(not _HAS_LIBTPU, reason="the aot_tpu extra (libtpu) is not installed")
def test_the_tiny_step_compiled_for_a_tpu_slice_fits_and_all_reduces_only_gradients(
    tmp_path):
  code, lines = _compile(tmp_path, "tpu:v5e-4", "--max_batch_compiles=1")
  assert code == 0, "\n".join(lines[-20:])
  assert _line(lines, "Memory per device:").endswith(": fits")
  assert _line(lines, "Largest global batch that fits: ")
  # Data parallel: the gradients (and the global batch's loss denominators) are summed
  # over the devices; nothing is gathered (the positions' gather stays per device).
  collectives = _line(lines, "Collectives: ")
  assert "all-reduce" in collectives and "all-gather" not in collectives, collectives
  assert int(collectives.split()[1]) <= 3, collectives
  assert _line(lines, "FLOPs per device per step:")
  assert _line(lines, "Step time (an estimate")


@pytest.mark.slow
@pytest.mark.skipif(not _HAS_LIBTPU, reason="the aot_tpu extra (libtpu) is not installed")
def test_an_unknown_target_is_one_line_from_the_tool(tmp_path):
  code, lines = _compile(tmp_path, "tpu:v9-8")
  assert code == errors.ERROR_EXIT
  assert [line for line in lines if "error:" in line] == [
      f"train: error: unknown target 'tpu:v9-8': the forms are {targets.known_targets()}"]


@pytest.mark.slow
@pytest.mark.skipif(not _HAS_CUDA_PLUGIN, reason="the aot_gpu extra (JAX's CUDA plugin) "
                    "is not installed")
def test_the_tiny_step_compiled_for_a_gpu_node_reports_memory_and_its_attention(tmp_path):
  code, lines = _compile(tmp_path, "gpu:2xH100", "--max_batch_compiles=0")
  # The Pallas attention is compiled for the GPU (a Triton custom call).
  assert "__gpu$xla.gpu.triton" in _line(lines, "Custom calls in the compiled step:")
  assert code == 0, "\n".join(lines[-20:])
  assert _line(lines, "Memory per device:").endswith(": fits")
  collectives = _line(lines, "Collectives: ")
  assert "all-gather" not in collectives, collectives
  assert _line(lines, "Kernels: ")
