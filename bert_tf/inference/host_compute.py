"""What the host heads (bert_tf.inference.host_heads, host_squad, host_tagging) share:
the exports' text input names, the model run in inference mode, and the readings of
its logits in NumPy as the serving graphs compute them."""

from typing import Dict

import numpy as np

# Text inputs, as the exports name them (bert_tf.export.serving_module).
TEXT, TEXT_B, QUESTION, CONTEXT = "text", "text_b", "question", "context"


def softmax(logits: np.ndarray) -> np.ndarray:
  """float32 softmax over the last axis."""
  shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
  return (shifted / shifted.sum(axis=-1, keepdims=True)).astype(np.float32)


def run_model(model, inputs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
  """The model's outputs in inference mode (compiled on its backend), as float32 NumPy."""
  outputs = model.predict_on_batch(inputs)
  return {name: np.asarray(value, np.float32) for name, value in outputs.items()}


def top_k_indices(values: np.ndarray, k: int) -> np.ndarray:
  """int32 [..., k]: the indices of the k largest of the last axis, largest first and
  the lower index first among equal ones, as tf.math.top_k orders them."""
  return np.argsort(-values, axis=-1, kind="stable")[..., :k].astype(np.int32)
