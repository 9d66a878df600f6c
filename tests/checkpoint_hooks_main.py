"""tools/train.py with one checkpoint's save held up, for tests that kill a run while that
checkpoint is being written, or with its first steps held up (a slow compile).

  python tests/checkpoint_hooks_main.py HOOK STEP SECONDS [--without=M1,M2] TOOL_FLAGS...

HOOK:
  slow_write   each array of `ckpt-STEP.h5` takes SECONDS longer to write, once the file
               is open under its temporary name;
  held_part    this process (not the chief) waits SECONDS before it marks its part of
               step STEP complete, having written `<marker>.held` beside it;
  held_steps   the loop of steps that reaches step STEP starts SECONDS late, this
               process's Python held up, its interpreter lock included (as by a
               compile under heavy load), its heartbeats with it.
--without makes the named modules unimportable (`tensorflow`: the JAX engine's remote
paths through fsspec).
"""

import ctypes
import os
import runpy
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _slow_write(step, seconds):
  from bert_tf.checkpoints import portable  # pylint: disable=g-import-not-at-top
  to_file, write = portable._to_file, portable.write  # pylint: disable=protected-access

  def slow_to_file(value):
    time.sleep(seconds)
    return to_file(value)

  def slow_write(path, content):
    if portable.step_of(path) != step:
      return write(path, content)
    portable._to_file = slow_to_file  # pylint: disable=protected-access
    try:
      return write(path, content)
    finally:
      portable._to_file = to_file  # pylint: disable=protected-access

  portable.write = slow_write


def _held_part(step, seconds):
  from bert_tf.training import checkpoint_parts  # pylint: disable=g-import-not-at-top
  from bert_tf.utils import files  # pylint: disable=g-import-not-at-top
  write_lines = files.write_lines
  marker = f"/ckpt-{step}.input-"

  def held_write_lines(path, lines):
    if marker in path and path.endswith(checkpoint_parts.PART_DONE):
      write_lines(path + ".held", ["held"])
      time.sleep(seconds)
    return write_lines(path, lines)

  files.write_lines = held_write_lines


def _held_steps(step, seconds):
  from bert_tf.training import run_stops  # pylint: disable=g-import-not-at-top
  run_steps = run_stops.RunStops.run_steps
  held = []

  def held_run_steps(stops, num_steps):
    if not held and stops.checkpoints.engine.step < step <= (
        stops.checkpoints.engine.step + num_steps):
      held.append(step)
      # libc's sleep called with the interpreter lock held: no Python thread runs.
      ctypes.PyDLL(None).sleep(int(seconds))
    return run_steps(stops, num_steps)

  run_stops.RunStops.run_steps = held_run_steps


def main(argv):
  hook, step, seconds = argv[1], int(argv[2]), float(argv[3])
  flags = argv[4:]
  if flags and flags[0].startswith("--without="):
    for module in flags.pop(0).split("=", 1)[1].split(","):
      sys.modules[module] = None
  for flag in flags:  # Keras takes its backend when the hooks import it, before the tool
    if flag.startswith("--backend="):
      os.environ["KERAS_BACKEND"] = flag.split("=", 1)[1]
  sys.path.insert(0, ROOT)
  {"slow_write": _slow_write, "held_part": _held_part,
   "held_steps": _held_steps}[hook](step, seconds)
  sys.argv = [os.path.join(ROOT, "tools", "train.py")] + flags
  runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
  main(sys.argv)
