"""The kernel sets' settings in the nested runtime.kernels section, and the flat keys of
earlier versions (runtime.gpu_attention, ...) read in their new places: from a
params.yaml, from a command-line override and from an override of a built config."""

import pytest
import yaml

from bert_tf import configs
from bert_tf.training import experiments


def test_the_jax_gpu_settings_are_a_nested_section_with_checked_values():
  runtime = configs.RuntimeConfig.from_dict(
      {"kernels": {"jax_gpu": {"attention": "xla", "layer_norm": "pallas"}}})
  assert runtime.kernels.jax_gpu == configs.JaxGpuKernelsConfig(
      attention="xla", dropout_generator="hash", layer_norm="pallas")
  assert runtime.as_dict()["kernels"] == {"jax_gpu": {
      "attention": "xla", "dropout_generator": "hash", "layer_norm": "pallas"}}
  with pytest.raises(configs.ConfigError,
                     match="runtime.kernels.jax_gpu: attention must be one of auto, "
                           "pallas, xla, got 'flash'"):
    experiments.experiment_from_dict({"runtime": {"kernels": {"jax_gpu": {
        "attention": "flash"}}}})


def test_an_earlier_params_yaml_with_flat_gpu_keys_reads_them_in_their_new_place(tmp_path):
  earlier = experiments.experiment_from_dict({}).as_dict()
  runtime = earlier["runtime"]
  del runtime["kernels"]
  runtime.update(gpu_attention="xla", gpu_dropout_generator="philox",
                 gpu_layer_norm="pallas")
  path = tmp_path / "params.yaml"
  path.write_text(yaml.safe_dump(earlier))
  with pytest.warns(configs.ObsoleteConfigKeyWarning,
                    match="runtime.gpu_attention: moved to runtime.kernels.jax_gpu.attention"):
    experiment = experiments.experiment_from_yaml(str(path))
  assert experiment.runtime.kernels.jax_gpu == configs.JaxGpuKernelsConfig(
      attention="xla", dropout_generator="philox", layer_norm="pallas")
  assert "gpu_attention" not in experiment.runtime.as_dict()


def test_flat_overrides_set_the_nested_settings_over_a_config_that_has_them(tmp_path):
  path = tmp_path / "params.yaml"
  experiments.experiment_from_dict({}).save(str(path))  # holds runtime.kernels
  with pytest.warns(configs.ObsoleteConfigKeyWarning):
    experiment = experiments.experiment_from_yaml(
        str(path), overrides=["runtime.gpu_attention=xla"])
  assert experiment.runtime.kernels.jax_gpu.attention == "xla"
  with pytest.warns(configs.ObsoleteConfigKeyWarning):
    built = configs.ExperimentConfig().override(["runtime.gpu_layer_norm=pallas",
                                                 "runtime.gpu_dropout_generator=threefry"])
  assert built.runtime.kernels.jax_gpu.layer_norm == "pallas"
  assert built.runtime.kernels.jax_gpu.dropout_generator == "threefry"
  assert built.runtime.kernels.jax_gpu.attention == "auto"


def test_a_flat_key_with_an_impossible_value_names_the_new_place():
  with pytest.warns(configs.ObsoleteConfigKeyWarning), pytest.raises(
      configs.ConfigError, match="runtime.kernels.jax_gpu: layer_norm must be one of"):
    experiments.experiment_from_dict({"runtime": {"gpu_layer_norm": "cuda"}})
