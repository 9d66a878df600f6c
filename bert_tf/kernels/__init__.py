"""Speed paths: per-backend implementations of the layers' hot spots, handed to a model
when it is built.

The layers (bert_tf.layers) compute as the paper reads, with keras.ops, on every Keras
backend. A model built with `kernels=K` (BertEncoder and the heads pass it down to every
layer) hands some of its layers' calls to K instead: the same variables and
checkpoints, the same results to rounding. `kernels=None` is the reference path. A
speed path is an object with these methods (each receives the calling layer):

  embeddings(layer, summed, training)            BertEmbeddings after the sum
  attention_context(layer, probs, value, training)  SelfAttention's dropout and P.V
  transformer_block(block, hidden_states, queries, attention_bias, training)
  masked_lm_head(head, hidden)                   MaskedLMHead after the gather
  classification_head(head, pooled, training)    ClassificationHead
  pretraining_loss(features, outputs, mlm_weight_sum, global_batch_size)

Which one an experiment uses is `runtime.fused_kernels`: true, false, or unset
(auto: the TensorFlow CPU path where the model runs on TensorFlow and TensorFlow sees
no GPU or TPU, the reference path everywhere else).
"""

from bert_tf import configs


def tensorflow_sees_accelerators() -> bool:
  """Whether TensorFlow has a GPU or TPU to place the model on."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))


def for_runtime(runtime: configs.RuntimeConfig):
  """The speed path for an experiment's runtime section, or None (the reference path).

  Raises:
    ConfigError: runtime.fused_kernels is true on a backend other than TensorFlow.
  """
  import keras  # pylint: disable=g-import-not-at-top
  on_tensorflow = keras.backend.backend() == "tensorflow"
  wanted = runtime.fused_kernels
  if wanted is None:
    wanted = on_tensorflow and runtime.distribution_strategy != "tpu" and not (
        runtime.num_gpus or tensorflow_sees_accelerators())
  if not wanted:
    return None
  if not on_tensorflow:
    raise configs.ConfigError(
        "runtime.fused_kernels: the fused CPU kernels are TensorFlow's; the "
        f"{keras.backend.backend()} backend runs the reference layers (leave it unset)")
  return tensorflow_cpu_kernels()


def tensorflow_cpu_kernels():
  """The TensorFlow CPU speed path (imports TensorFlow)."""
  from bert_tf.kernels import tensorflow_cpu as module  # pylint: disable=g-import-not-at-top
  return module.KERNELS

