"""The runtime.kernels section (configs.kernel_sets.KernelsConfig): the set chosen by
name and each registered set's settings, read with its settings class; an earlier
params.yaml read the same; and the flat keys of earlier versions (runtime.gpu_attention,
...) read in their new places: from a params.yaml, from a command-line override and
from an override of a built config. The registry itself, with a set of a test's own:
tests/kernels/test_kernel_registry.py."""

import pytest
import yaml

from bert_tf import configs
from bert_tf.configs import kernel_sets
from bert_tf.kernels.jax_gpu.settings import JaxGpuKernelsConfig
from bert_tf.training import experiments


def test_the_jax_gpu_settings_are_a_nested_section_with_checked_values():
  runtime = configs.RuntimeConfig.from_dict(
      {"kernels": {"jax_gpu": {"attention": "xla", "layer_norm": "pallas"}}})
  assert runtime.kernels.jax_gpu == JaxGpuKernelsConfig(
      attention="xla", dropout_generator="hash", layer_norm="pallas")
  assert runtime.as_dict()["kernels"]["jax_gpu"] == {
      "attention": "xla", "dropout_generator": "hash", "layer_norm": "pallas"}
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
  assert experiment.runtime.kernels.jax_gpu == JaxGpuKernelsConfig(
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


def test_the_section_holds_the_chosen_set_and_every_registered_sets_settings():
  section = configs.RuntimeConfig().as_dict()["kernels"]
  assert section == {kernel_sets.CHOICE_KEY: "",
                     **{name: cls().as_dict()
                        for name, cls in kernel_sets.settings_classes().items()}}


def test_a_params_yaml_written_before_sets_were_chosen_by_name_reads_the_same(tmp_path):
  written = experiments.experiment_from_dict(
      {"runtime": {"kernels": {"jax_gpu": {"attention": "xla"}}}})
  earlier = written.as_dict()
  del earlier["runtime"]["kernels"][kernel_sets.CHOICE_KEY]
  path = tmp_path / "params.yaml"
  path.write_text(yaml.safe_dump(earlier))
  assert experiments.experiment_from_yaml(str(path)) == written


def test_a_set_is_chosen_by_a_registered_name_and_a_misspelt_one_is_named():
  chosen = experiments.experiment_from_dict({"runtime": {"kernels": {"set": "jax_gpu"}}})
  assert chosen.runtime.kernels.set == "jax_gpu"
  with pytest.raises(configs.ConfigError, match="runtime.kernels.set: no kernel set "
                                                "'jax_gpux'; did you mean 'jax_gpu'"):
    experiments.experiment_from_dict({"runtime": {"kernels": {"set": "jax_gpux"}}})
  with pytest.raises(configs.ConfigError, match="Unknown config key 'runtime.kernels.jax_gpuu'; "
                                                "did you mean 'runtime.kernels.jax_gpu'"):
    experiments.experiment_from_dict({"runtime": {"kernels": {"jax_gpuu": {}}}})
