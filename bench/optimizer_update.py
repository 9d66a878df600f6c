"""The optimizer update of every variable of a model: ours against in-place variants.

Ours (bert_tf.training.optimizers.Optimizer) computes each variable's new value and
moments in one XLA function of tensors and writes them back with `assign`. The variants
hand the variables themselves to the XLA function, which then updates their buffers in
place (the same formulas: Optimizer._new_values), with the skip flag and the gradient
factor as run-time tensors (as the trainer has them) or as Python constants. All run over
the trainable variables of a real encoder with zero gradients, taking turns.

  python bench/optimizer_update.py --size=base
"""

import os
import statistics
import sys
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_string("size", "base", "Encoder size whose variables are updated.")
flags.DEFINE_integer("rounds", 9, "Interleaved rounds.")


def main(argv):
  del argv
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  from bert_tf.models.bert_encoder import BertEncoder  # pylint: disable=g-import-not-at-top
  from bert_tf.training import optimizers  # pylint: disable=g-import-not-at-top

  encoder = BertEncoder.from_config_object(configs.EncoderConfig.from_size(FLAGS.size))
  variables = [optimizers._tf_variable(v) for v in encoder.trainable_variables]  # pylint: disable=protected-access
  grads = [tf.zeros_like(v) for v in variables]
  optimizer = optimizers.build_optimizer(configs.OptimizerConfig(weight_decay_rate=0.01),
                                         train_steps=1000)
  optimizer.build(encoder.trainable_variables)
  step = tf.constant(10)

  @tf.function
  def ours():
    optimizer.apply_gradients(grads, encoder.trainable_variables, step)
    return tf.constant(0.0)

  def in_place(should_apply, scale):
    @tf.function
    def run():
      lr = tf.cast(optimizer.learning_rate(step), tf.float32)
      t = tf.cast(step, tf.float32) + 1.0
      for grad, keras_variable, variable in zip(grads, encoder.trainable_variables,
                                                variables):
        slots = optimizer.slots[optimizers.variable_path(keras_variable)]
        updates[optimizer.decays(keras_variable)](variable, grad, lr, t, should_apply(),
                                                  scale(), slots["m"], slots["v"])
      return tf.constant(0.0)
    return run

  def in_place_update(decay):
    def update(var, grad, lr, t, should_apply, scale, *slots):
      new = optimizer._new_values(var.read_value(), grad, lr, t, should_apply, scale,  # pylint: disable=protected-access
                                  *[s.read_value() for s in slots], decay=decay)
      for variable, value in zip((var, *slots), new):
        variable.assign(value)
    return tf.function(update, jit_compile=True)

  updates = {decay: in_place_update(decay) for decay in (False, True)}

  # The trainer's skip flag (non-finite gradients) and clipping factor are known only
  # at run time, as these variables' values; as Python constants XLA folds them away.
  flag, factor = tf.Variable(True), tf.Variable(1.0)
  systems = {"ours (values, then assign)": ours,
             "in place, flag and factor as tensors": in_place(flag.read_value,
                                                              factor.read_value),
             "in place, flag and factor as constants": in_place(lambda: True, lambda: 1.0)}
  for run in systems.values():
    run().numpy()
    run().numpy()
  times = {name: [] for name in systems}
  for r in range(FLAGS.rounds):
    for name in (list(systems) if r % 2 == 0 else list(systems)[::-1]):
      start = time.perf_counter()
      systems[name]().numpy()
      times[name].append(time.perf_counter() - start)
  params = sum(int(tf.size(v)) for v in variables)
  medians = {name: 1000 * statistics.median(t) for name, t in times.items()}
  first = medians["ours (values, then assign)"]
  for name, ms in medians.items():
    print(f"{FLAGS.size} ({params / 1e6:.1f}M parameters, {len(variables)} variables): "
          f"{name} {ms:.1f} ms")
  print(", ".join(f"{name}: {first / ms:.2f}x ours" for name, ms in medians.items())
        + f"; command: {common.command_line()}")


if __name__ == "__main__":
  app.run(main)
