"""Run as a script with KERAS_BACKEND=jax (JAX_PLATFORMS=cpu): lowers the jit-compiled
JAX training step of a tiny BertPretrainer, built as bench/gpu_worker.py
builds it (mixed_bfloat16, the project's AdamW with its schedule,
bert_tf.training.jax_engine.step.make_train_step), and prints one JSON line
(tests/kernels/test_jax_step_hlo.py): "scatter_adds", every scatter with an add
combiner in its StableHLO text, as {"operand": [dims], "rows": int, "updates": int},
and "kernels", the names of the Triton kernels it calls.

  python tests/kernels/jax_step_hlo_main.py [KERNELS]

KERNELS: "reference" (default, kernels=None), "jax_gpu" (the JAX GPU speed path with
its Pallas kernels, interpreted) or "jax_gpu_cuda" (the same lowered for CUDA, without
a GPU: the kernels go through Pallas's Triton lowering).
"""

import json
import math
import re
import sys

import keras
import numpy as np

from bert_tf import configs
from bert_tf import constants
from bert_tf import losses
from bert_tf.models import BertEncoder, BertPretrainer
from bert_tf.training.jax_engine import step as jax_step
from bert_tf.training.jax_engine import optimizer as stateless_optimizer

BATCH, LENGTH, PREDICTIONS = 4, 16, 4
ENCODER = dict(vocab_size=100, hidden_size=32, num_layers=2, num_attention_heads=2,
               intermediate_size=64, max_position_embeddings=64)

# One StableHLO scatter: its dimension numbers, its combiner region and its signature.
_SCATTER = re.compile(
    r'"stablehlo\.scatter"\((?P<args>[^)]*)\)\s*<\{(?P<attrs>.*?)\}>\s*\(\{(?P<region>.*?)\}\)'
    r'\s*:\s*\((?P<types>[^)]*)\)', re.DOTALL)


def _dims(tensor_type: str):
  """'4x16x1xi32' -> [4, 16, 1]."""
  return [int(d) for d in tensor_type.split("x")[:-1]]


def _numbers(attrs: str, name: str):
  match = re.search(name + r"\s*=\s*\[([^\]]*)\]", attrs)
  return [int(x) for x in match.group(1).split(",") if x.strip()] if match else []


def scatter_adds(text: str):
  """The scatter-adds of a StableHLO module's text: for each, the operand's dims, the
  number of rows it scatters into (the product of the operand dims the indices
  address) and the number of updates (index tuples)."""
  found = []
  for match in _SCATTER.finditer(text):
    if "stablehlo.add" not in match.group("region"):
      continue
    types = re.findall(r"tensor<([^>]*)>", match.group("types"))
    operands = (len(types) - 1) // 2
    operand, indices = _dims(types[0]), _dims(types[operands])
    attrs = match.group("attrs")
    index_vector_dim = int(re.search(r"index_vector_dim\s*=\s*(\d+)", attrs).group(1))
    tuples = math.prod(d for i, d in enumerate(indices) if i != index_vector_dim)
    rows = math.prod(operand[d] for d in _numbers(attrs, "scatter_dims_to_operand_dims"))
    found.append({"operand": operand, "rows": rows, "updates": tuples})
  return found


def lowered_step_text(kernels=None, platform=None) -> str:
  """The StableHLO text of the tiny pretrainer's jitted training step, lowered for
  `platform` ("cuda"; default the local one)."""
  keras.utils.set_random_seed(0)
  config = configs.EncoderConfig(**ENCODER)
  model = BertPretrainer(BertEncoder.from_config_object(config, dtype="mixed_bfloat16",
                                                        kernels=kernels))
  optimizer = stateless_optimizer.build_stateless_optimizer(
      configs.OptimizerConfig(), 1000, model.trainable_variables)
  names = (*constants.ENCODER_INPUTS, constants.MASKED_LM_POSITIONS)
  step = jax_step.make_train_step(
      model, optimizer, lambda batch, outputs, _: losses.pretraining_loss(batch, outputs),
      inputs_fn=lambda batch: {name: batch[name] for name in names})
  state = jax_step.state_from(model, optimizer)
  if platform is None:
    return step.lower(state, synthetic_batch()).as_text()
  from jax import export  # pylint: disable=g-import-not-at-top
  triton = export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")
  return export.export(step, platforms=[platform], disabled_checks=[triton])(
      state, synthetic_batch()).mlir_module()


def synthetic_batch():
  """Full-length rows, two segments each, sorted masked positions (numpy int32/float32)."""
  rng = np.random.default_rng(0)
  types = (np.arange(LENGTH) >= LENGTH // 2).astype(np.int32)
  positions = np.sort(np.stack([rng.choice(np.arange(1, LENGTH), PREDICTIONS, replace=False)
                                for _ in range(BATCH)]), axis=1).astype(np.int32)
  return {
      constants.INPUT_WORD_IDS: rng.integers(0, ENCODER["vocab_size"], (BATCH, LENGTH),
                                             dtype=np.int32),
      constants.INPUT_MASK: np.ones((BATCH, LENGTH), np.int32),
      constants.INPUT_TYPE_IDS: np.tile(types, (BATCH, 1)),
      constants.MASKED_LM_POSITIONS: positions,
      constants.MASKED_LM_IDS: rng.integers(0, ENCODER["vocab_size"], (BATCH, PREDICTIONS),
                                            dtype=np.int32),
      constants.MASKED_LM_WEIGHTS: np.ones((BATCH, PREDICTIONS), np.float32),
      constants.NEXT_SENTENCE_LABELS: rng.integers(0, 2, (BATCH,), dtype=np.int32),
  }


def main(argv):
  kernels, platform = None, None
  which = argv[1] if len(argv) > 1 else "reference"
  if which.startswith("jax_gpu"):
    from bert_tf.kernels.jax_gpu import hooks  # pylint: disable=g-import-not-at-top
    platform = "cuda" if which == "jax_gpu_cuda" else None
    kernels = hooks.JaxGpuKernels(attention="pallas", layer_norm="pallas",
                                    interpret=platform is None)
  text = lowered_step_text(kernels, platform)
  print(json.dumps({"scatter_adds": scatter_adds(text),
                    "kernels": re.findall(r'name = "(_\w+_kernel)"', text)}), flush=True)


if __name__ == "__main__":
  main(sys.argv)
