"""Kernel sets chosen through the registry keyed by (Keras backend, platform)
(bert_tf.kernels): CONTRIBUTING.md's recipe "Adding a kernel for one backend" followed
end to end with a toy set registered for the backend and platform these tests run on."""

import keras
import numpy as np
import pytest

import trainer_helpers
from bert_tf import configs
from bert_tf import kernels
from bert_tf.kernels import protocol
from bert_tf.tasks import base


class ToyKernels(protocol.Kernels):
  """Step 1: the hooks, here the reference LayerNorm counted (the same results)."""

  name = "toy"

  def __init__(self, runtime: configs.RuntimeConfig):
    self.runtime = runtime
    self.layer_norms = 0

  def layer_norm(self, layer, x):
    self.layer_norms += 1
    return super().layer_norm(layer, x)


def _here():
  backend = keras.backend.backend()
  return backend, kernels.platform_of(backend, configs.RuntimeConfig())


@pytest.fixture(name="toy")
def _toy():
  """Step 2: the toy set registered for this backend and platform (the set it replaces
  put back afterwards); yields the sets `build` made."""
  built = []

  def build(runtime):
    built.append(ToyKernels(runtime))
    return built[-1]

  backend, platform = _here()
  previous = kernels.register(kernels.KernelSet(backend, platform, "toy", build))
  try:
    yield built
  finally:
    kernels.unregister(backend, platform)
    if previous is not None:
      kernels.register(previous)


def _model(fused_kernels=None, **runtime):
  experiment = trainer_helpers.tiny_experiment(
      runtime=dict(fused_kernels=fused_kernels, **runtime))
  keras.utils.set_random_seed(3)
  return base.get_task(experiment).build_model()


def _inputs():
  rng = np.random.default_rng(0)
  return {"input_word_ids": rng.integers(5, 50, (2, 16)).astype(np.int32),
          "input_mask": np.ones((2, 16), np.int32),
          "input_type_ids": np.zeros((2, 16), np.int32),
          "masked_lm_positions": np.array([[1, 2, 3, 4]] * 2, np.int32)}


def test_the_model_is_built_with_the_set_registered_for_its_backend_and_platform(toy):
  model = _model()
  (kernel_set,) = toy
  blocks = model.encoder.transformer_layers
  assert model.encoder.kernels is kernel_set and model.masked_lm.kernels is kernel_set
  assert all(block.kernels is kernel_set and block.attention.kernels is kernel_set
             for block in blocks)
  outputs = model(_inputs(), training=False)
  assert kernel_set.layer_norms > 0  # the model computed through the toy's hooks
  reference = _model(fused_kernels=False)
  assert reference.encoder.kernels is None
  reference.set_weights(model.get_weights())
  np.testing.assert_allclose(np.asarray(reference(_inputs(), training=False)["mlm_logits"]),
                             np.asarray(outputs["mlm_logits"]), rtol=1e-6, atol=1e-6)


def test_the_set_is_built_with_the_experiments_runtime_section(toy):
  _model(seed=11, kernels={"jax_gpu": {"attention": "xla"}})
  assert toy[-1].runtime.seed == 11 and toy[-1].runtime.kernels.jax_gpu.attention == "xla"


def test_a_set_off_by_default_runs_only_when_fused_kernels_asks_for_it():
  backend, platform = _here()
  previous = kernels.register(kernels.KernelSet(
      backend, platform, "toy", ToyKernels, on_by_default=False))
  try:
    assert kernels.for_runtime(configs.RuntimeConfig()) is None
    assert isinstance(kernels.for_runtime(configs.RuntimeConfig(fused_kernels=True)),
                      ToyKernels)
    assert kernels.for_runtime(configs.RuntimeConfig(fused_kernels=False)) is None
  finally:
    kernels.unregister(backend, platform)
    if previous is not None:
      kernels.register(previous)


def test_fused_kernels_where_no_set_is_registered_is_an_error_naming_backend_and_platform():
  backend, platform = _here()
  previous = kernels.unregister(backend, platform)
  try:
    assert kernels.for_runtime(configs.RuntimeConfig()) is None
    with pytest.raises(configs.ConfigError,
                       match=f"no speed path is registered for the {backend} backend on "
                             f"{platform} .*registered: .*jax on gpu \\(jax_gpu\\)"):
      kernels.for_runtime(configs.RuntimeConfig(fused_kernels=True))
  finally:
    if previous is not None:
      kernels.register(previous)


def test_the_built_in_sets_are_registered_where_they_run():
  assert kernels.registered("tensorflow", "cpu").name == "tensorflow_cpu"
  assert kernels.registered("tensorflow", "cpu").on_by_default
  assert not kernels.registered("tensorflow", "gpu").on_by_default
  assert kernels.registered("jax", "gpu").name == "jax_gpu"
  assert kernels.registered("jax", "cpu") is None
