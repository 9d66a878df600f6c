"""The optimizer update of every variable of a model: ours against the forms it replaced.

Ours (bert_tf.training.optimizers.Optimizer) updates each variable and its moments in
place in one XLA function, skipped as a whole by a `tf.cond` on a skipped step. The
variants use the same formulas (Optimizer._new_values), with the skip flag and the
gradient factor as run-time tensors, as the trainer has them:
  - new values, then assign: the XLA function returns the new values (the old ones where
    the flag is False, a `tf.where`) and `assign` installs them (the form before);
  - in place, skip inside: the in-place function with that `tf.where` inside it.
All run over the trainable variables of a real encoder with zero gradients, taking turns.

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
  keras_variables = encoder.trainable_variables
  variables = [optimizers._tf_variable(v) for v in keras_variables]  # pylint: disable=protected-access
  grads = [tf.zeros_like(v) for v in variables]
  optimizer = optimizers.build_optimizer(configs.OptimizerConfig(weight_decay_rate=0.01),
                                         train_steps=1000)
  optimizer.build(keras_variables)
  step = tf.constant(10)
  # The trainer's skip flag (non-finite gradients) and clipping factor are known only
  # at run time, as these variables' values; as Python constants XLA folds them away.
  flag, factor = tf.Variable(True), tf.Variable(1.0)

  @tf.function
  def ours():
    optimizer.apply_gradients(grads, keras_variables, step, should_apply=flag.read_value(),
                              gradient_scale=factor.read_value())
    return tf.constant(0.0)

  def with_skip_inside(old, new, should_apply):
    return [tf.where(should_apply, n, o) for o, n in zip(old, new)]

  def new_values_then_assign(decay):
    @tf.function(jit_compile=True)
    def compute(var, grad, lr, t, should_apply, scale, m, v):
      new = optimizer._new_values(var, grad, lr, t, scale, m, v, decay=decay)  # pylint: disable=protected-access
      return with_skip_inside((var, m, v), new, should_apply)

    def update(variable, grad, lr, t, should_apply, scale, m, v):
      new = compute(tf.convert_to_tensor(variable), grad, lr, t, should_apply, scale,
                    tf.convert_to_tensor(m), tf.convert_to_tensor(v))
      for target, value in zip((variable, m, v), new):
        target.assign(value)
    return update

  def in_place_skip_inside(decay):
    @tf.function(jit_compile=True)
    def write(handles, grad, lr, t, should_apply, scale):
      old = [tf.raw_ops.ReadVariableOp(resource=h, dtype=tf.float32) for h in handles]
      new = optimizer._new_values(old[0], grad, lr, t, scale, *old[1:], decay=decay)  # pylint: disable=protected-access
      for handle, value in zip(handles, with_skip_inside(old, new, should_apply)):
        tf.raw_ops.AssignVariableOp(resource=handle, value=value)

    def update(variable, grad, lr, t, should_apply, scale, m, v):
      write([variable.handle, m.handle, v.handle], grad, lr, t, should_apply, scale)
    return update

  def run_all(make_update):
    updates = {decay: make_update(decay) for decay in (False, True)}

    @tf.function
    def run():
      lr = tf.cast(optimizer.learning_rate(step), tf.float32)
      t = tf.cast(step, tf.float32) + 1.0
      should_apply, scale = flag.read_value(), factor.read_value()
      for grad, keras_variable, variable in zip(grads, keras_variables, variables):
        slots = optimizer.slots[optimizers.variable_path(keras_variable)]
        updates[optimizer.decays(keras_variable)](variable, grad, lr, t, should_apply,
                                                  scale, slots["m"], slots["v"])
      return tf.constant(0.0)
    return run

  systems = {"ours (in place, skipped by tf.cond)": ours,
             "new values, then assign": run_all(new_values_then_assign),
             "in place, skip by tf.where inside": run_all(in_place_skip_inside)}
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
  first = medians["ours (in place, skipped by tf.cond)"]
  for name, ms in medians.items():
    print(f"{FLAGS.size} ({params / 1e6:.1f}M parameters, {len(variables)} variables): "
          f"{name} {ms:.1f} ms")
  print("ours is " + ", ".join(f"{ms / first:.2f}x as fast as {name}"
                               for name, ms in medians.items() if ms != first)
        + f"; command: {common.command_line()}")


if __name__ == "__main__":
  app.run(main)
