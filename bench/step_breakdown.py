"""Where the time of our pretraining step goes: the whole step beside its parts.

In one process, taking turns round after round, times:
  step            the trainer's training step (as bench/pretraining_step.py times it);
  forward+backward  the loss and its gradients, no optimizer;
  forward         the loss alone;
  optimizer       the AdamW update of every variable, alone;
  step, no dropout  the whole step with dropout rates set to 0 (a second model);
  matmuls only    every matrix product of the encoder's and the masked-LM head's forward
                  and backward at the step's shapes, chained as in the step, nothing else.
The matmul-only time is what the step would take if everything but the matrix products
were free: the share of the step left to levers that do not change the products.

  python bench/step_breakdown.py --size=base --batch_size=8
"""

import dataclasses
import os
import statistics
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))

import common  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_string("size", "base", "Encoder size.")
flags.DEFINE_integer("batch_size", 8, "Sequences per step.")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
flags.DEFINE_integer("predictions", 20, "Masked positions per sequence.")
flags.DEFINE_integer("rounds", 5, "Interleaved rounds (each part once per round).")
flags.DEFINE_bool("write_readme", True, "Update the step-breakdown section of "
                  "bench/README.md.")


def matmul_replica(encoder, batch, seq, predictions):
  """A tf.function doing the step's matrix products and nothing else.

  Per layer, forward: query, key, value and output projections [B*T, H] x [H, H], the
  feed-forward pair [B*T, H] x [H, I] and [B*T, I] x [I, H], the attention scores and
  context per head; backward: each product's input and weight gradients. The masked-LM
  head: [B*P, H] x [H, V] and its two gradients. (The last block counts in full and the
  pooler and NSP head not at all: both are small at these sizes.)

  Returns:
    (function of no arguments returning a float32 scalar, its GFLOP per call).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  h, inter, heads = encoder.hidden_size, encoder.intermediate_size, encoder.num_attention_heads
  rows, head = batch * seq, encoder.hidden_size // encoder.num_attention_heads
  weight = lambda *shape: tf.Variable(tf.random.normal(shape, stddev=0.02))
  kernels = {name: weight(h, h) for name in ("query", "key", "value", "output")}
  kernels.update(intermediate=weight(h, inter), ffn_output=weight(inter, h))
  embedding = weight(encoder.vocab_size, h)
  x0 = tf.random.normal([rows, h])
  at_masked = tf.random.normal([batch * predictions, h])

  def split(t):
    return tf.reshape(t, [batch * heads, seq, head])

  @tf.function
  def run():
    saved, x = [], x0
    for _ in range(encoder.num_layers):
      q, k, v = (split(x @ kernels[n]) for n in ("query", "key", "value"))
      scores = tf.matmul(q, k, transpose_b=True)
      context = tf.reshape(tf.matmul(scores, v), [rows, h])
      attended = context @ kernels["output"]
      widened = attended @ kernels["intermediate"]
      saved.append((x, q, k, v, scores, context, attended, widened))
      x = widened @ kernels["ffn_output"]
    logits = tf.matmul(at_masked, embedding, transpose_b=True)
    total = tf.reduce_sum(tf.matmul(logits, embedding)[0])
    total += tf.reduce_sum(tf.matmul(logits, at_masked, transpose_a=True)[0])
    grad = x
    for x, q, k, v, scores, context, attended, widened in reversed(saved):
      weight_grads = [tf.matmul(widened, grad, transpose_a=True)]
      grad = tf.matmul(grad, kernels["ffn_output"], transpose_b=True)
      weight_grads.append(tf.matmul(attended, grad, transpose_a=True))
      grad = tf.matmul(grad, kernels["intermediate"], transpose_b=True)
      weight_grads.append(tf.matmul(context, grad, transpose_a=True))
      grad = split(tf.matmul(grad, kernels["output"], transpose_b=True))
      grad_scores = tf.matmul(grad, v, transpose_b=True)
      grad_v = tf.matmul(scores, grad, transpose_a=True)
      grad_q, grad_k = tf.matmul(grad_scores, k), tf.matmul(grad_scores, q, transpose_a=True)
      grad_x = 0.0
      for name, g in (("query", grad_q), ("key", grad_k), ("value", grad_v)):
        g = tf.reshape(g, [rows, h])
        weight_grads.append(tf.matmul(x, g, transpose_a=True))
        grad_x += tf.matmul(g, kernels[name], transpose_b=True)
      grad = grad_x
      total += tf.add_n([tf.reduce_sum(w[0]) for w in weight_grads])
    return total + tf.reduce_sum(grad[0])

  per_layer = (2 * rows * h * h * 4 + 2 * 2 * rows * h * inter
               + 2 * 2 * batch * heads * seq * seq * head)
  head_flops = 2 * batch * predictions * h * encoder.vocab_size
  return run, 3 * (encoder.num_layers * per_layer + head_flops) / 1e9


def main(argv):
  del argv
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  import ours_pretraining_worker  # pylint: disable=g-import-not-at-top

  shape = (FLAGS.size, FLAGS.batch_size, FLAGS.seq_length, FLAGS.predictions)
  trainer, iterator = ours_pretraining_worker.build_trainer(*shape, 1, False)
  one = tf.constant(1, tf.int32)
  loop = trainer.train_loop_function
  features = next(iter(trainer.task.build_inputs(trainer.experiment.train_data)))

  @tf.function
  def forward_backward(f):
    grads, losses, _ = trainer._forward_backward(f, {}, None)  # pylint: disable=protected-access
    # One element of every gradient, so that none of them is pruned from the graph.
    return losses["loss"] + tf.add_n([tf.reshape(g, [-1])[0] for g in grads])

  @tf.function
  def forward(f):
    outputs = trainer.model(trainer.task.model_inputs(f), training=True)
    return trainer.task.compute_loss(f, outputs, FLAGS.batch_size)

  variables = trainer.model.trainable_variables
  zeros = [tf.zeros_like(v) for v in variables]

  @tf.function
  def optimizer_only():
    trainer.optimizer.apply_gradients(zeros, variables, trainer.step.read_value(),
                                      gradient_scale=tf.constant(1.0))
    return tf.constant(0.0)

  # The same step on a model without dropout: a second trainer, built the same way.
  sized = configs.EncoderConfig.from_size(FLAGS.size)
  no_dropout = dataclasses.replace(sized, dropout_rate=0.0, attention_dropout_rate=0.0)
  original_from_size = configs.EncoderConfig.from_size
  configs.EncoderConfig.from_size = classmethod(lambda cls, size: no_dropout)
  try:
    plain_trainer, plain_iterator = ours_pretraining_worker.build_trainer(*shape, 1, False)
  finally:
    configs.EncoderConfig.from_size = original_from_size
  plain_loop = plain_trainer.train_loop_function
  matmuls, matmul_gflop = matmul_replica(sized, FLAGS.batch_size, FLAGS.seq_length,
                                         FLAGS.predictions)
  parts = {
      "step": lambda: float(loop(iterator, one)["loss"]),
      "forward+backward": lambda: float(forward_backward(features)),
      "forward": lambda: float(forward(features)["loss"]),
      "optimizer": lambda: float(optimizer_only()),
      "step, no dropout": lambda: float(plain_loop(plain_iterator, one)["loss"]),
      "matmuls only": lambda: float(matmuls()),
  }
  for run in parts.values():
    run()
    run()
  times = common.interleaved_times(parts, FLAGS.rounds, report_rounds=True)
  medians = {name: statistics.median(t) for name, t in times.items()}
  step = medians["step"]
  rows = [[name, f"{1000 * m:.0f}", f"{100 * m / step:.0f}%"] for name, m in medians.items()]
  table = common.markdown_table(["part", "median ms", "of the step"], rows)
  command = common.command_line()
  summary = (f"{FLAGS.size} {FLAGS.batch_size}x{FLAGS.seq_length}: the step's matrix "
             f"products alone ({matmul_gflop:.0f} GFLOP) take "
             f"{100 * medians['matmuls only'] / step:.0f}% of the step "
             f"({matmul_gflop / medians['matmuls only']:.0f} GFLOP/s); the step without "
             f"dropout takes {100 * medians['step, no dropout'] / step:.0f}% of it, the "
             f"optimizer update alone {100 * medians['optimizer'] / step:.0f}%")
  print(table)
  print(summary)
  common.write_results(f"step_breakdown_{FLAGS.size}", {
      "command": command, "machine": common.machine_description(),
      "median_seconds": medians, "matmul_gflop": matmul_gflop,
      "rounds": FLAGS.rounds})
  if FLAGS.write_readme:
    common.update_readme_section(
        f"step_breakdown_{FLAGS.size}",
        f"Command: `{command}` (medians of {FLAGS.rounds} interleaved rounds, one "
        f"process)\n\n{table}\n\n{summary}.")
  print(f"step_breakdown: command: {command}")


if __name__ == "__main__":
  app.run(main)
