"""tools/train.py with the checkpoint of one step written slowly, for tests that kill a
run while that checkpoint is being written.

  python tests/slow_checkpoint_write_main.py STEP SECONDS TOOL_FLAGS...

Each array of `ckpt-STEP.h5` takes SECONDS longer to write, once the file is open under
its temporary name; the other checkpoints are written as usual.
"""

import os
import runpy
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv):
  step, seconds = int(argv[1]), float(argv[2])
  sys.path.insert(0, ROOT)
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
  sys.argv = [os.path.join(ROOT, "tools", "train.py")] + argv[3:]
  runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
  main(sys.argv)
