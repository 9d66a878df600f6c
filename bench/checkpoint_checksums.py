"""What the CRC32C checksums of portable checkpoints cost: the save (write) and the
restore (read) of a BERT-sized trainer checkpoint, with checksums and without, taking
turns.

  python -m bench.checkpoint_checksums --encoder=base --turns=5 --directory=/tmp

The checkpoint holds what a pretraining run's does (bert_tf.checkpoints.portable): the
encoder's weights, the masked-LM head sharing its embeddings (stored once), the AdamW
moments of every weight, the step and an input position, float32 (BERT-base: about 1.3
GB). `save` times portable.write of a snapshot already in host memory, `restore`
portable.read of the file (every array, each checked as it is read). "Without" computes
no CRC32C (a constant instead), as the format did before the checksums. The
modes take turns (ABBA), so that a loaded machine weighs on both alike; the figures are
the medians and their ratio, and the time the checksums of every array take alone.
With --directory=/dev/shm (memory) the disk's own noise stays out.
"""

import contextlib
import os
import statistics
import tempfile
import time
from typing import Dict, List
from unittest import mock

import numpy as np
from absl import app
from absl import flags

from bert_tf import configs
from bert_tf.checkpoints import portable

FLAGS = flags.FLAGS

MODES = ("with checksums", "without")


class _Array:
  """What portable.snapshot reads of a variable: path, value, shape, dtype."""

  def __init__(self, path: str, shape):
    self.path = path
    self.value = np.random.default_rng(len(path)).standard_normal(shape).astype(np.float32)
    self.shape, self.dtype = self.value.shape, self.value.dtype


class _Item:

  def __init__(self, variables):
    self.variables = variables


def bert_state(size: str) -> portable.Snapshot:
  """A trainer checkpoint's content of a BERT of `size`, in host memory."""
  c = configs.EncoderConfig.from_size(size)
  h, f = c.hidden_size, c.intermediate_size
  shapes = {"embeddings/word_embeddings": (c.vocab_size, h),
            "embeddings/position_embeddings": (c.max_position_embeddings, h),
            "embeddings/token_type_embeddings": (c.type_vocab_size, h),
            "embeddings/layer_norm/gamma": (h,), "embeddings/layer_norm/beta": (h,),
            "pooler/kernel": (h, h), "pooler/bias": (h,)}
  for i in range(c.num_layers):
    layer = f"transformer_layer_{i}"
    for name in ("query", "key", "value", "attention_output"):
      shapes.update({f"{layer}/{name}/kernel": (h, h), f"{layer}/{name}/bias": (h,)})
    shapes.update({f"{layer}/intermediate/kernel": (h, f), f"{layer}/intermediate/bias": (f,),
                   f"{layer}/output/kernel": (f, h), f"{layer}/output/bias": (h,)})
    for norm in ("attention_layer_norm", "output_layer_norm"):
      shapes.update({f"{layer}/{norm}/gamma": (h,), f"{layer}/{norm}/beta": (h,)})
  encoder = [_Array(path, shape) for path, shape in shapes.items()]
  head = [v for v in encoder if v.path.startswith("embeddings/")]
  head.append(_Array("masked_lm/output_bias", (c.vocab_size,)))
  optimizer = {f"{slot}/{v.path}": _Array(f"{slot}/{v.path}", v.shape)
               for slot in ("m", "v") for v in encoder + head[-1:]}
  optimizer["count"] = np.asarray(1000, np.int64)
  return portable.snapshot({"encoder": _Item(encoder), "masked_lm": _Item(head)},
                           optimizer, step=1000,
                           position={"batches_read": 1000, "global_batch_size": 256})


def _without_checksums():
  """The format's reads and writes as before the checksums: no CRC32C."""
  return mock.patch.object(portable, "crc32c", lambda array: 0)


def measure(content: portable.Snapshot, repeats: int, directory: str
            ) -> Dict[str, Dict[str, List[float]]]:
  """{mode: {"save": [s], "restore": [s]}} of `content` written to and read from
  `directory`, the modes taking turns `repeats` times."""
  path = portable.path_for_step(directory, 1000)
  times = {mode: {"save": [], "restore": []} for mode in MODES}
  for repeat in range(repeats):
    # ABBA: neither mode always follows the other's deleted file.
    for mode in MODES if repeat % 2 == 0 else MODES[::-1]:
      with _without_checksums() if mode == "without" else contextlib.nullcontext():
        start = time.perf_counter()
        portable.write(path, content)
        times[mode]["save"].append(time.perf_counter() - start)
        start = time.perf_counter()
        portable.read(path)
        times[mode]["restore"].append(time.perf_counter() - start)
      os.remove(path)
  return times


def checksum_seconds(content: portable.Snapshot) -> float:
  """The time the CRC32C of every array of `content` takes alone (the checksums' own
  share of a save, or of a restore)."""
  start = time.perf_counter()
  for array in content.arrays.values():
    portable.crc32c(array)
  return time.perf_counter() - start


def report(times: Dict[str, Dict[str, List[float]]], size: str, gigabytes: float,
           crc_seconds: float) -> str:
  lines = [f"BERT-{size} trainer checkpoint, {gigabytes:.2f} GB; medians of "
           f"{len(times[MODES[0]]['save'])} turns each; the CRC32C of every array "
           f"alone: {crc_seconds:.2f} s"]
  for what in ("save", "restore"):
    medians = [statistics.median(times[mode][what]) for mode in MODES]
    lines.append(f"  {what}: {medians[0]:.2f} s with checksums, {medians[1]:.2f} s "
                 f"without ({100 * (medians[0] / medians[1] - 1):+.1f}%)")
  return "\n".join(lines)


def main(argv):
  del argv
  content = bert_state(FLAGS.encoder)
  with tempfile.TemporaryDirectory(dir=FLAGS.directory) as directory:
    times = measure(content, FLAGS.turns, directory)
  gigabytes = sum(a.nbytes for a in content.arrays.values()) / 1e9
  print(report(times, FLAGS.encoder, gigabytes, checksum_seconds(content)))
  print(f"command: python -m bench.checkpoint_checksums --encoder={FLAGS.encoder} "
        f"--turns={FLAGS.turns}"
        + (f" --directory={FLAGS.directory}" if FLAGS.directory else ""))


if __name__ == "__main__":
  # Defined here, not on import: tests import this module's arithmetic beside the
  # tools, whose flags share absl's registry.
  flags.DEFINE_string("encoder", "base", "Encoder size (configs.ENCODER_SIZES).")
  flags.DEFINE_integer("turns", 5, "Saves and restores of each mode.")
  flags.DEFINE_string("directory", None, "Where the checkpoint is written (default: a "
                      "temporary folder).")
  app.run(main)
