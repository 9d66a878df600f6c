"""Kernel sets registered by name and chosen by runtime.kernels (bert_tf.configs.kernel_sets,
bert_tf.kernels.for_runtime): CONTRIBUTING.md's recipe "Adding a kernel for one backend"
followed step by step with a toy set and its settings, registered for the backend and
platform these tests run on under a name of this module's own."""

import dataclasses

import keras
import numpy as np
import pytest

import registry_names
import trainer_helpers
from bert_tf import configs
from bert_tf import kernels
from bert_tf.configs import kernel_sets
from bert_tf.kernels import protocol
from bert_tf.tasks import base
from bert_tf.training import experiments

TOY = registry_names.local_name("toy_kernels", __file__)


# Step 1: the hooks, here the reference LayerNorm counted (the same results).
class ToyKernels(protocol.Kernels):
  """Counts the LayerNorms it computes, in steps of `settings.step`."""

  name = TOY

  def __init__(self, settings):
    self.settings = settings
    self.layer_norms = 0

  def layer_norm(self, layer, x):
    self.layer_norms += self.settings.step
    return super().layer_norm(layer, x)


# Step 2: its settings, a Config dataclass validated in `validate`.
@dataclasses.dataclass
class ToySettings(configs.Config):
  """What each LayerNorm adds to the count."""

  step: int = 1

  def validate(self):
    configs.require(self.step > 0, f"step must be positive, got {self.step}")


def _here():
  backend = keras.backend.backend()
  return backend, kernels.platform_of(backend, configs.RuntimeConfig())


@pytest.fixture(name="toy")
def _toy():
  """Step 3: the set registered by name for this backend and platform, not the default
  there; yields the Kernels objects `build` made, and unregisters it after."""
  built = []

  def build(runtime):
    built.append(ToyKernels(runtime.kernels.settings(TOY)))
    return built[-1]

  backend, platform = _here()
  toy_set = kernel_sets.KernelSet(TOY, backend, (platform,), build, settings=ToySettings,
                                  default_platforms=())
  with registry_names.registered(lambda: kernel_sets.register(toy_set),
                                 lambda: kernel_sets.unregister(TOY)):
    yield built


def _model(**runtime):
  experiment = trainer_helpers.tiny_experiment(runtime=runtime)
  keras.utils.set_random_seed(3)
  return base.get_task(experiment).build_model()


def _inputs():
  rng = np.random.default_rng(0)
  return {"input_word_ids": rng.integers(5, 50, (2, 16)).astype(np.int32),
          "input_mask": np.ones((2, 16), np.int32),
          "input_type_ids": np.zeros((2, 16), np.int32),
          "masked_lm_positions": np.array([[1, 2, 3, 4]] * 2, np.int32)}


# Step 4: chosen by name, with its settings, the model gives the reference's outputs.
def test_a_set_chosen_by_name_builds_the_model_with_its_settings(toy):
  model = _model(kernels={"set": TOY, TOY: {"step": 3}})
  (kernel_set,) = toy
  assert kernel_set.settings == ToySettings(step=3)
  blocks = model.encoder.transformer_layers
  assert model.encoder.kernels is kernel_set and model.masked_lm.kernels is kernel_set
  assert all(block.kernels is kernel_set and block.attention.kernels is kernel_set
             for block in blocks)
  outputs = model(_inputs(), training=False)
  assert kernel_set.layer_norms > 0 and kernel_set.layer_norms % 3 == 0
  reference = _model(fused_kernels=False)
  assert reference.encoder.kernels is None
  reference.set_weights(model.get_weights())
  np.testing.assert_allclose(np.asarray(reference(_inputs(), training=False)["mlm_logits"]),
                             np.asarray(outputs["mlm_logits"]), rtol=1e-6, atol=1e-6)


def test_a_set_that_is_not_the_default_runs_only_when_named(toy):
  backend, platform = _here()
  default = kernel_sets.default_for(backend, platform)
  runtime = configs.RuntimeConfig()
  chosen = kernels.for_runtime(runtime)
  assert not isinstance(chosen, ToyKernels)
  assert (chosen is None) == (default is None)
  assert isinstance(kernels.for_runtime(runtime.override({"kernels": {"set": TOY}})),
                    ToyKernels)
  assert kernels.for_runtime(runtime.override(
      {"fused_kernels": False, "kernels": {"set": TOY}})) is None
  assert len(toy) == 1


def test_its_settings_are_a_section_of_runtime_kernels_that_round_trips_yaml(toy, tmp_path):
  del toy
  experiment = trainer_helpers.tiny_experiment(runtime={"kernels": {TOY: {"step": 2}}})
  assert experiment.runtime.kernels.settings(TOY) == ToySettings(step=2)
  assert getattr(experiment.runtime.kernels, TOY) == ToySettings(step=2)
  assert experiment.runtime.as_dict()["kernels"][TOY] == {"step": 2}
  path = str(tmp_path / "params.yaml")
  experiment.save(path)
  assert experiments.experiment_from_yaml(path) == experiment
  assert trainer_helpers.tiny_experiment().runtime.kernels.settings(TOY) == ToySettings()
  with pytest.raises(configs.ConfigError,
                     match=f"runtime.kernels.{TOY}: step must be positive, got 0"):
    trainer_helpers.tiny_experiment(runtime={"kernels": {TOY: {"step": 0}}})


def test_an_unregistered_set_is_no_longer_a_section_or_a_choice(toy):
  del toy
  kernel_sets.unregister(TOY)
  with pytest.raises(configs.ConfigError, match=f"Unknown config key 'runtime.kernels.{TOY}'"):
    trainer_helpers.tiny_experiment(runtime={"kernels": {TOY: {"step": 2}}})
  with pytest.raises(configs.ConfigError, match=f"runtime.kernels.set: no kernel set '{TOY}'"):
    trainer_helpers.tiny_experiment(runtime={"kernels": {"set": TOY}})


def test_a_named_set_of_another_backend_or_platform_is_an_error_saying_where_each_runs():
  backend, platform = _here()
  elsewhere = [p for p in kernel_sets.PLATFORMS if p != platform][0]
  name = registry_names.local_name("toy_elsewhere", __file__)
  other = kernel_sets.KernelSet(name, backend, (elsewhere,), ToyKernels, default_platforms=())
  with registry_names.registered(lambda: kernel_sets.register(other),
                                 lambda: kernel_sets.unregister(name)):
    with pytest.raises(configs.ConfigError,
                       match=f"the kernel set '{name}' runs {backend} on {elsewhere}; the "
                             f"model runs on {backend} on {platform}"):
      kernels.for_runtime(configs.RuntimeConfig().override({"kernels": {"set": name}}))


def test_two_defaults_for_one_backend_and_platform_and_a_name_twice_are_refused(toy):
  del toy
  backend, platform = _here()
  with pytest.raises(ValueError, match="registered twice"):
    kernel_sets.register(kernel_sets.KernelSet(TOY, backend, (platform,), ToyKernels))
  # On a backend of this test's own, so that no set of the package is its default.
  own_backend = registry_names.local_name("toy_backend", __file__)
  name = registry_names.local_name("toy_default", __file__)
  first = kernel_sets.KernelSet(name, own_backend, ("cpu",), ToyKernels)
  second = kernel_sets.KernelSet(name + "_2", own_backend, ("cpu", "gpu"), ToyKernels)
  with registry_names.registered(lambda: kernel_sets.register(first),
                                 lambda: kernel_sets.unregister(name)):
    assert kernel_sets.default_for(own_backend, "cpu") is first
    with pytest.raises(ValueError, match=f"'{name}' is already the default of {own_backend} "
                                         "on cpu"):
      kernel_sets.register(second)
    assert kernel_sets.registered(second.name) is None


def test_fused_kernels_where_no_set_runs_is_an_error_naming_backend_platform_and_sets():
  backend, platform = _here()
  removed = [kernel_sets.unregister(s.name) for s in kernel_sets.of_backend(backend)]
  try:
    assert kernels.for_runtime(configs.RuntimeConfig()) is None
    with pytest.raises(configs.ConfigError,
                       match=f"no speed path is registered for the {backend} backend"):
      kernels.for_runtime(configs.RuntimeConfig(fused_kernels=True))
  finally:
    for kernel_set in removed:
      kernel_sets.register(kernel_set)


@pytest.mark.parametrize("name", kernel_sets.names())
def test_every_registered_set_says_where_it_runs_and_has_its_settings_section(name):
  kernel_set = kernel_sets.registered(name)
  assert kernel_set.platforms and set(kernel_set.platforms) <= set(kernel_sets.PLATFORMS)
  for platform in kernel_set.default_platforms:
    assert kernel_sets.default_for(kernel_set.backend, platform) is kernel_set
  section = configs.RuntimeConfig().as_dict()["kernels"]
  if kernel_set.settings is None:
    assert name not in section
  else:
    assert section[name] == kernel_set.settings().as_dict()
