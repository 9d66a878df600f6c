"""The encoder's fused element-wise pieces, forward and backward, three ways.

For each piece of bert_tf.layers.fusion, at the shapes of one BERT layer's training step,
times in one process, taking turns:
  custom gradient  ours: an XLA forward and an XLA backward joined by a custom gradient;
  XLA autodiff     the same forward as one XLA function, differentiated by TensorFlow
                   (the compiled forward then also outputs the intermediates its
                   gradient reads);
  plain            the same formula as TensorFlow ops (oneDNN and Eigen kernels).
Each timed call runs the forward and the gradient of every input, in one tf.function.

  python bench/fusion_pieces.py --size=base --batch_size=8
"""

import math
import os
import statistics
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_string("size", "base", "Encoder size whose layer shapes are used.")
flags.DEFINE_integer("batch_size", 8, "Sequences per step.")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
flags.DEFINE_integer("rounds", 30, "Interleaved rounds.")
flags.DEFINE_bool("write_readme", True, "Update the fusion section of bench/README.md.")


def pieces(tf, fusion, batch, seq, hidden, intermediate):
  """{piece: (inputs, {way: function of the inputs})}: the first input is the output's
  gradient, each function returns every other input's gradient."""
  normal = lambda *shape: tf.random.normal(shape, seed=len(shape))
  bits = tf.cast(tf.random.uniform([batch, seq, hidden], 0, 1 << 16, tf.int32, seed=1),
                 tf.uint16)
  threshold, scale = tf.constant(6554, tf.uint16), tf.constant(65536 / (65536 - 6554))

  def layer_norm(x, gamma, beta):
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    inv = tf.math.rsqrt(variance + 1e-12) * gamma
    return x * inv + (beta - mean * inv)

  def bias_gelu(x, bias):
    return tf.nn.gelu(x + bias, approximate=False)

  def residual_layer_norm(x, bias, residual, gamma, beta):
    dropped = tf.where(bits >= threshold, (x + bias) * scale, 0.0)
    return layer_norm(residual + dropped, gamma, beta)

  formulas = {
      "LayerNorm": ((normal(batch, seq, hidden), normal(hidden), normal(hidden)), layer_norm,
                    lambda x, g, b: fusion.layer_norm(x, g, b, 1e-12)),
      "bias + GELU": ((normal(batch, seq, intermediate), normal(intermediate)), bias_gelu,
                      fusion.bias_gelu),
      "bias + dropout + residual + LayerNorm": (
          (normal(batch, seq, hidden), normal(hidden), normal(batch, seq, hidden),
           normal(hidden), normal(hidden)), residual_layer_norm,
          lambda *a: fusion.residual_layer_norm(*a, 1e-12,
                                                dropout=(bits, threshold, scale))),
  }

  def with_gradients(fn):
    @tf.function
    def run(output_gradient, *args):
      with tf.GradientTape() as tape:
        tape.watch(args)
        y = fn(*args)
      return tape.gradient(y, list(args), output_gradients=output_gradient)
    return run

  return {name: ((normal(*inputs[0].shape),) + inputs,
                 {"custom gradient": with_gradients(ours),
                          "XLA autodiff": with_gradients(tf.function(plain, jit_compile=True)),
                          "plain": with_gradients(plain)})
          for name, (inputs, plain, ours) in formulas.items()}


def main(argv):
  del argv
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  from bert_tf.layers import fusion  # pylint: disable=g-import-not-at-top

  sized = configs.EncoderConfig.from_size(FLAGS.size)
  cases = pieces(tf, fusion, FLAGS.batch_size, FLAGS.seq_length, sized.hidden_size,
                 sized.intermediate_size)
  calls = {}
  for piece, (inputs, ways) in cases.items():
    results = {way: [t.numpy() for t in fn(*inputs)] for way, fn in ways.items()}
    for way, values in results.items():  # every way computes the same thing
      for a, b in zip(values, results["plain"]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(b).max()),
                                   err_msg=f"{piece}, {way}")
    for way, fn in ways.items():
      calls[(piece, way)] = (lambda fn=fn, inputs=inputs: [t.numpy() for t in fn(*inputs)])
  times = common.interleaved_times(calls, FLAGS.rounds)
  medians = {key: statistics.median(t) for key, t in times.items()}
  rows_out = []
  for piece in cases:
    ours = medians[(piece, "custom gradient")]
    rows_out.append([piece, f"{1000 * ours:.2f}",
                     f"{1000 * medians[(piece, 'XLA autodiff')]:.2f}",
                     f"{1000 * medians[(piece, 'plain')]:.2f}",
                     f"{medians[(piece, 'XLA autodiff')] / ours:.2f}x",
                     f"{medians[(piece, 'plain')] / ours:.2f}x"])
  table = common.markdown_table(
      ["piece (forward + backward)", "custom gradient ms", "XLA autodiff ms", "plain ms",
       "speedup vs XLA autodiff", "speedup vs plain"], rows_out)
  command = common.command_line()
  batch, seq = FLAGS.batch_size, FLAGS.seq_length
  shape = (f"{FLAGS.size}: [{batch}, {seq}, {sized.hidden_size}] and [{batch}, {seq}, "
           f"{sized.intermediate_size}]")
  print(table)
  common.write_results(f"fusion_pieces_{FLAGS.size}", {
      "command": command, "machine": common.machine_description(), "shape": shape,
      "median_seconds": {f"{p} | {w}": m for (p, w), m in medians.items()},
      "rounds": FLAGS.rounds})
  if FLAGS.write_readme:
    common.update_readme_section(
        f"fusion_pieces_{FLAGS.size}",
        f"Command: `{command}` (medians of {FLAGS.rounds} interleaved rounds, one "
        f"process; {shape}; per encoder layer, bias + GELU runs once and bias + dropout + "
        f"residual + LayerNorm twice, the plain LayerNorm only after the embeddings and "
        f"in the masked-LM head)\n\n{table}")
  print(f"fusion_pieces: command: {command}")


if __name__ == "__main__":
  app.run(main)
