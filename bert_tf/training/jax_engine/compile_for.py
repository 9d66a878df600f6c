"""The training step of an experiment compiled ahead of time for an accelerator target
it does not run on (bert_tf.training.jax_engine.targets: a TPU slice, a GPU node), on a
CPU, from abstract shapes: `bert-tf-train --experiment=E --compile_for=tpu:v5e-16`.

The step is the JAX engine's own (JaxEngine.train_step over JaxEngine.build's model and
optimizer): the experiment's model, policy, optimizer, clipping, accumulation and
kernels (those of the target's platform, bert_tf.kernels.target_platform), data parallel
over the target's devices under the same keras.distribution a run sets. The model and
optimizer are built in a keras.StatelessScope, so their variables hold shapes and dtypes
but no values, and the step is lowered from jax.ShapeDtypeStructs
(step.abstract_state, `abstract_batch`). What is read off the compiled program is
compiled_report's.
"""

import dataclasses
import time
from typing import Callable, Dict, Optional

import jax
import keras

from bert_tf import configs
from bert_tf import kernels as kernels_lib
from bert_tf.tasks import base as task_base
from bert_tf.training.jax_engine import compiled_report
from bert_tf.training.jax_engine import engine as engine_lib
from bert_tf.training.jax_engine import step as step_lib
from bert_tf.training.jax_engine import targets as targets_lib
from bert_tf.utils import errors

# What an out-of-memory compile says (XLA's TPU compiler refuses a program over HBM).
_OUT_OF_MEMORY = ("RESOURCE_EXHAUSTED", "Ran out of memory", "out of memory")


def abstract_batch(task: task_base.Task, data_config: configs.DataConfig,
                   global_batch_size: int) -> Dict[str, jax.ShapeDtypeStruct]:
  """The global batch a run's step takes, as jax.ShapeDtypeStructs sharded as the
  engine shards it (step.batch_sharding): the features, dtypes and lengths of the data
  loader's synthetic batches (format dummy; fine-tuning batches at their longest bucket)
  with `global_batch_size` rows."""
  dummy = dataclasses.replace(data_config, format="dummy", global_batch_size=1,
                              input_path="")
  batches = task.data_loader(dummy).host_batches()
  try:
    one = next(batches)
  finally:
    getattr(batches, "close", lambda: None)()
  out = {}
  for key, value in one.items():
    shape = (global_batch_size,) + tuple(value.shape[1:])
    out[key] = jax.ShapeDtypeStruct(shape, value.dtype, sharding=step_lib.batch_sharding(shape))
  return out


def _abstract_variables():
  """A scope in which Keras variables are created with shapes, dtypes and initializers
  but no values, and in which the ones without values are not given any when an inner
  scope (model.stateless_call's) ends: values would be placed on the target's
  compile-only devices, which hold none."""
  return keras.StatelessScope(initialize_variables=False)


class Compiler:
  """Compiles `experiment`'s training step for `target` at any global batch size.

  Attributes: target (targets.Target), engine (the JaxEngine whose model, optimizer and
  step are compiled), kernels (what the model was built with, for the report).
  """

  def __init__(self, experiment: configs.ExperimentConfig, target: targets_lib.Target,
               log_fn: Callable[[str], None]):
    self.target = target
    self.experiment = experiment
    devices = target.devices()
    with kernels_lib.target_platform(target.platform):
      task = task_base.get_task(experiment)
      self.engine = engine_lib.JaxEngine(experiment, task, log_fn, devices=devices)
      with _abstract_variables():
        self.engine.build()
      self.kernels = task.kernels
    self.state = step_lib.abstract_state(self.engine.model, self.engine.optimizer)

  def compile(self, global_batch_size: int) -> Optional[compiled_report.Compiled]:
    """The step compiled for `global_batch_size` rows, or None where the compiler
    refuses it for want of memory.

    Raises:
      UserError: a batch the devices and micro-batches cannot share evenly.
    """
    unit = self.batch_unit
    if global_batch_size % unit:
      raise errors.InputError(
          f"global batch {global_batch_size}: it must be a multiple of {unit} (the "
          f"{len(self.engine.devices)} devices times "
          f"trainer.gradient_accumulation_steps)")
    batch = abstract_batch(self.engine.task, self.experiment.train_data, global_batch_size)
    started = time.monotonic()
    with kernels_lib.target_platform(self.target.platform), _abstract_variables():
      lowered = self.engine.train_step().lower(self.state, batch)
      try:
        compiled = lowered.compile(self.target.compiler_options)
      except Exception as e:  # pylint: disable=broad-except
        if any(words in str(e) for words in _OUT_OF_MEMORY):
          return None
        raise
    return compiled_report.Compiled.read(compiled, global_batch_size,
                                         time.monotonic() - started)

  @property
  def batch_unit(self) -> int:
    """Global batch sizes step by this: one row per device and micro-batch."""
    return len(self.engine.devices) * self.experiment.trainer.gradient_accumulation_steps

  def fits(self, compiled: Optional[compiled_report.Compiled]) -> bool:
    """Whether a compiled step (None: refused) fits the target's memory per device."""
    return compiled is not None and compiled.peak_bytes <= self.target.memory_bytes

  def largest_batch(self, first_size: int, first: Optional[compiled_report.Compiled],
                    max_compiles: int, log_fn: Callable[[str], None]
                    ) -> compiled_report.BatchSearch:
    """The largest global batch whose step fits the target's memory, from the step
    compiled at `first_size` (`first`, None where refused) and at most `max_compiles`
    more compiles: a line through two sizes predicts it, then bisection between the
    largest size that fits and the smallest that does not."""
    unit, memory = self.batch_unit, self.target.memory_bytes
    tried = {first_size: first}
    fitting = [first_size] if self.fits(first) else []
    failing = [] if fitting else [first_size]

    def attempt(size):
      compiled = self.compile(size)
      tried[size] = compiled
      (fitting if self.fits(compiled) else failing).append(size)
      log_fn(f"  global batch {size}: " + (
          "compiler out of memory" if compiled is None else
          f"{compiled.peak_bytes / 2**30:.2f} GiB per device, "
          f"{'fits' if self.fits(compiled) else 'does not fit'}"))

    for _ in range(max_compiles):
      low = max(fitting, default=0)
      high = min(failing, default=None)
      if high is not None and high - low <= unit:
        break
      if high is None and len(tried) == 1:
        size = 2 * low  # a second point for the line
      elif high is None:
        sizes = sorted(s for s in tried if tried[s] is not None)[-2:]
        a, b = (tried[s].peak_bytes for s in sizes)
        per_row = (b - a) / (sizes[1] - sizes[0])
        size = sizes[1] + int((memory - b) / per_row) if per_row > 0 else 2 * low
        size = max(size // unit * unit, low + unit)
      elif low == 0:
        size = max(high // 2 // unit * unit, unit)
      else:
        size = (low + high) // 2 // unit * unit
      if size in tried:
        break
      attempt(size)
    return compiled_report.BatchSearch(max(fitting, default=0), min(failing, default=None),
                                       len(tried) - 1)


def compile_for(experiment: configs.ExperimentConfig, target_name: str,
                log_fn: Callable[[str], None] = print, max_batch_compiles: int = 4) -> dict:
  """Compiles `experiment`'s step for the target named `target_name` at its
  train_data.global_batch_size, writes the report (compiled_report.describe) to log_fn,
  and searches the largest global batch that fits with up to `max_batch_compiles`
  more compiles (0: none).

  Returns:
    the report's figures (compiled_report.figures).

  Raises:
    TargetError: an unknown target, or one this install cannot compile for.
  """
  target = targets_lib.resolve(target_name)
  previous = keras.distribution.distribution()
  try:
    return _compile_for(experiment, target, log_fn, max_batch_compiles)
  finally:
    # The engine distributed over the target's devices; variables still without values
    # are given them on the previous distribution's devices, if ever.
    keras.distribution.set_distribution(previous)


def _compile_for(experiment, target, log_fn, max_batch_compiles):
  """compile_for's work, for a resolved target."""
  target_name = target.name
  compiler = Compiler(experiment, target, log_fn)
  batch_size = experiment.train_data.global_batch_size
  compiled = compiler.compile(batch_size)
  search = None
  if max_batch_compiles:
    log_fn(f"Searching the largest global batch that fits ({max_batch_compiles} compiles "
           "at most):")
    search = compiler.largest_batch(batch_size, compiled, max_batch_compiles, log_fn)
  if compiled is None:
    raise errors.InputError(
        f"{target_name}: the compiler ran out of device memory for global batch "
        f"{batch_size}" + (f"; the largest that fits is {search.largest}"
                           if search and search.largest else ""))
  report = compiled_report.Report(experiment, target, compiled, search, compiler.kernels)
  for line in report.describe():
    log_fn(line)
  return report.figures
