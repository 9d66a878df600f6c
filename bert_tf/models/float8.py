"""Float8 training of the encoder's projections (runtime.float8_training).

The six Dense layers of every Transformer block (query, key, value, attention output,
intermediate, output) train through Keras's float8 mode (`Dense.quantize("float8")`):
each product quantizes its inputs and kernel to float8 e4m3 and its output gradient to
e5m2, with delayed scaling (each scale comes from a history of the tensor's recent
absolute maxima). XLA turns these quantize-dequantize pairs around a matmul into float8
GEMMs on GPUs that have them (Hopper and later); elsewhere the products run in the
compute dtype on float8-rounded values. Everything else keeps the dtype policy: the
embeddings, the pooler, the heads, and the masked-LM output layer, whose kernel is the
word-embedding table (a tied matmul, not a Dense layer).

Each converted layer keeps its `kernel` and `bias` variables and gains six float32
scaling variables (inputs, kernel and output-gradient scale and amax history). They are
trainable variables that the optimizer overwrites with the values their "gradient"
carries (Keras's `overwrite_with_gradient`), so the optimizer neither decays nor clips
them. A checkpoint of a float8 model therefore holds the plain model's weights under the
same paths plus that extra state: it restores into a plain model (which leaves the
extra state unread), and a plain checkpoint restores into the layers before they are
converted (bert_tf.training.trained_model.build), the scales then starting at 1.

Keras trains float8 on every backend, but bert_tf does so on JAX only (the JAX trainer
and the GPU benchmark); other backends refuse the setting. On CPUs the run says in one
warning that float8 is emulated there.
"""

import logging
from typing import Dict, Optional, Sequence

import keras

from bert_tf import configs
from bert_tf.models import lora

MODE = "float8"


def projections(encoder) -> Dict[str, keras.layers.Dense]:
  """{'transformer_layer_0.query': Dense, ...}: the six projections of every block of a
  BertEncoder (the layers LoRA may target too), in block order."""
  return lora.target_layers(encoder, configs.LORA_TARGETS)


def enable(model) -> Dict[str, keras.layers.Dense]:
  """Converts model.encoder's block projections to Keras float8 training, in place.

  Call it on a built model before the optimizer is built over its variables (the
  conversion adds trainable variables) and after any weights are restored into it.

  Args:
    model: an EncoderTaskModel (BertPretrainer, a fine-tuning model) on the JAX backend.

  Returns:
    The converted layers, {name: Dense} as `projections` names them.

  Raises:
    ConfigError: as check_supported.
  """
  check_supported(model)
  note = emulation_note(keras.distribution.list_devices())
  if note:
    logging.warning(note)
  layers = projections(model.encoder)
  for layer in layers.values():
    if layer.quantization_mode is None:
      layer.quantize(MODE)
  return layers


def emulation_note(devices: Sequence[str]) -> Optional[str]:
  """One line saying float8 is emulated, where every device is a CPU ("cpu:0", as
  keras.distribution.list_devices names them); None elsewhere."""
  if devices and all("cpu" in device.lower() for device in devices):
    return ("bert_tf: runtime.float8_training on CPU is emulated: the products run in the "
            "compute dtype on float8-rounded values, no faster than without it (float8 "
            "GEMMs need a GPU that has them, Hopper and later)")
  return None


def check_supported(model) -> None:
  """Raises ConfigError where `enable` would refuse: Keras on another backend than JAX,
  or a model with LoRA adapters (Keras's float8 Dense has no LoRA path)."""
  backend = keras.backend.backend()
  if backend != "jax":
    raise configs.ConfigError(
        f"runtime.float8_training trains on the JAX backend only; Keras runs on {backend} "
        "(a float8 run's checkpoints load into the plain model: set it false here)")
  if getattr(model, "lora_adapters", None) is not None:
    raise configs.ConfigError("runtime.float8_training does not combine with LoRA "
                              "(model.lora_rank)")

