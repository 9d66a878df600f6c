"""Low-rank adapters (LoRA, Hu et al. 2021) on the encoder's projections.

A LoRA model trains, for each targeted Dense layer of every Transformer block, two
matrices A [I, r] and B [r, O] (B starts at zero) whose scaled product joins the
frozen kernel: y = x (W + (alpha / r) A B) + b. Everything else in the encoder (the
embeddings, LayerNorms, biases, the pooler) is frozen; the task's head trains. A
training run saves the adapters and the head only (`EncoderTaskModel.trained_items`):
the frozen encoder is the warm-start checkpoint it was restored from, and `merge`
folds the adapters into the kernels for serving, which then costs what the plain
model costs.
"""

from typing import Dict, Sequence

import keras

from bert_tf import configs

# The projections of a Transformer block an adapter may target, by configs.LORA_TARGETS
# name.
TARGETS = {
    "query": lambda block: block.attention.query,
    "key": lambda block: block.attention.key,
    "value": lambda block: block.attention.value,
    "attention_output": lambda block: block.attention.output_dense,
    "intermediate": lambda block: block.intermediate,
    "output": lambda block: block.output_dense,
}
assert tuple(TARGETS) == configs.LORA_TARGETS


class Adapters:
  """A model's adapter variables, the checkpoint item `lora`: `kernels` maps each
  adapted layer's name (`transformer_layer_0.query`) to its [A float32 [I, r],
  B float32 [r, O]] Keras variables."""

  name = "lora"

  def __init__(self, layers: Dict[str, keras.layers.Dense]):
    self.kernels = {name: [layer.lora_kernel_a, layer.lora_kernel_b]
                    for name, layer in layers.items()}

  @property
  def variables(self):
    """Every adapter variable, A then B of each layer in order."""
    return [variable for pair in self.kernels.values() for variable in pair]

  weights = variables

  def checkpoint_structure(self):
    """The layout a checkpoint stores (bert_tf.checkpoints.trackables)."""
    return {"kernels": self.kernels}


def target_layers(encoder, targets: Sequence[str]) -> Dict[str, keras.layers.Dense]:
  """{name: Dense} of `targets` (keys of TARGETS) in every block of a BertEncoder."""
  unknown = sorted(set(targets) - set(TARGETS))
  if unknown:
    raise ValueError(f"Unknown LoRA targets {unknown}; known: {', '.join(TARGETS)}")
  return {f"{block.name}.{target}": TARGETS[target](block)
          for block in encoder.transformer_layers for target in targets}


def enable(model, rank: int, targets: Sequence[str] = ("query", "value"),
           alpha: float = 0.0) -> Adapters:
  """Adds rank-`rank` adapters to `targets` in model.encoder and freezes the encoder.

  Args:
    model: an EncoderTaskModel (built, its encoder weights already restored).
    rank: r, the adapters' inner dimension.
    targets: keys of TARGETS.
    alpha: the adapters' scale numerator; 0 means `rank` (a scale of 1).

  Returns:
    The Adapters, also set as model.lora_adapters.
  """
  if rank < 1:
    raise ValueError(f"LoRA rank must be positive, got {rank}")
  if getattr(model, "lora_adapters", None) is not None:
    raise ValueError(f"{model.name} has LoRA adapters already")
  layers = target_layers(model.encoder, targets)
  for layer in layers.values():
    layer.enable_lora(rank, lora_alpha=alpha or rank)
  adapter_ids = {id(layer.lora_kernel_a) for layer in layers.values()}
  adapter_ids |= {id(layer.lora_kernel_b) for layer in layers.values()}
  for variable in model.encoder.weights:
    if id(variable) not in adapter_ids:
      variable.trainable = False
  adapters = Adapters(layers)
  # Outside Keras's and TensorFlow's attribute tracking: a SavedModel or `.keras` file
  # of the model reaches the adapter variables through their layers already.
  object.__setattr__(model, "lora_adapters", adapters)
  object.__setattr__(model, "_lora_layers", layers)
  return adapters


def merge(model) -> None:
  """Folds each adapter into its kernel, W + (alpha / r) A B, and turns LoRA off: the
  model then computes what it computed with the adapters, through plain Dense layers.
  A model without adapters is left as it is."""
  layers = getattr(model, "_lora_layers", None)
  if not layers:
    return
  for layer in layers.values():
    if not layer.lora_enabled:
      continue
    # With LoRA on, Dense.kernel is W + (alpha / r) A B; with it off, the variable W.
    merged = keras.ops.convert_to_tensor(layer.kernel)
    layer.lora_enabled = False
    layer.kernel.assign(merged)
