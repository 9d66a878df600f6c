"""The JAX GPU speed path's hooks (bert_tf.kernels.jax_gpu.hooks) on a tiny BertPretrainer, its Pallas
kernels (attention, LayerNorms) in interpret mode: the same loss, logits and gradients
as the reference layers (dropout off), the same as with XLA ops in place of the kernels
(dropout on: the same masks), masks
reproducible from the seed state and new at every step, and chosen by for_runtime
where JAX runs on a GPU.

Keras fixes its backend per process and this one runs TensorFlow, so the checks run
once in a subprocess with KERAS_BACKEND=jax (tests/kernels/jax_gpu/jax_gpu_hooks_main.py).
Where the Pallas attention does not compile (a CPU), the XLA form is chosen (checked in
this process).
Tolerance: 1e-5 absolute in float32 on logits and gradients (largest gradient ~0.3).
"""

import pytest

import kernels_helpers

# A tiny model through Pallas interpret mode: about 45 s. The kernels one by one:
# test_attention.py, test_dropout.py and test_layer_norm.py here (default suite).
slow = pytest.mark.slow

TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def figures():
  return kernels_helpers.jax_script_figures("jax_gpu_hooks_main.py")


def _assert_close(differences):
  assert differences["grad_scale"] > 1e-3  # the gradients are not all zero
  for name in ("loss", "logits", "grads"):
    assert differences[name] <= TOLERANCE, (name, differences)


@slow
@pytest.mark.parametrize("sparse_last_layer", [True, False])
def test_the_speed_path_computes_what_the_reference_layers_compute(figures,
                                                                   sparse_last_layer):
  _assert_close(figures["reference_vs_kernels"][f"sparse_last_layer={sparse_last_layer}"])


@slow
def test_the_pallas_kernels_equal_their_xla_form_with_dropout(figures):
  _assert_close(figures["pallas_vs_xla"])


@slow
def test_dropout_masks_follow_the_seed_state(figures):
  dropout = figures["dropout"]
  assert dropout["same_state_same_loss"]
  assert dropout["next_state_other_loss"]
  # Every active Dropout layer (embeddings; per block: probabilities, attention output,
  # feed-forward output) advanced its Keras seed generator.
  assert dropout["seed_states_advanced"] == dropout["seed_states"] == 7


@slow
def test_for_runtime_picks_the_jax_gpu_path_on_a_jax_gpu_only(figures):
  chosen = figures["for_runtime"]
  assert chosen["cpu_unset"] == "None"
  assert chosen["cpu_true"].startswith("ConfigError")
  assert chosen["gpu_unset"] == "JaxGpuKernels"
  assert chosen["gpu_false"] == "None"


def test_where_the_attention_kernel_does_not_compile_the_xla_form_is_used(caplog):
  from bert_tf.kernels.jax_gpu import hooks  # pylint: disable=g-import-not-at-top
  # Here (a CPU) Pallas compiles only in interpret mode: the check fails, and says why.
  assert not hooks.pallas_attention_works()
  assert "attention runs as XLA ops" in caplog.text
  assert hooks.JaxGpuKernels().attention_implementation == "xla"
