"""Input-pipeline stall check: our pretraining step fed from real TFRecords (the
project's reader: parallel interleave, parse, shuffle, prefetch) against the same step
fed from one in-memory batch. Both run the trainer's loop in their own process, taking
turns; the target is a TFRecord step time within 3% of the in-memory one.

The TFRecords hold random ids in the original release's features (input_ids,
input_mask, segment_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights,
next_sentence_labels), written to --record_dir unless they exist there.

  python bench/input_pipeline.py --size=mini --batch_size=32
"""

import os
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))

import common  # pylint: disable=g-import-not-at-top,wrong-import-position
import protocol  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_string("size", "mini", "Encoder size.")
flags.DEFINE_integer("batch_size", 32, "Sequences per step.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("predictions", 20, "Masked positions per sequence.")
flags.DEFINE_integer("num_records", 4096, "Records to write (split over 4 files).")
flags.DEFINE_string("record_dir", "/tmp/bert_tf_bench_records", "Where the TFRecords go.")
flags.DEFINE_integer("rounds", 4, "Interleaved rounds.")
flags.DEFINE_integer("steps_per_round", 3, "Timed steps per worker per round.")
flags.DEFINE_bool("write_readme", True, "Update the input-pipeline section of README.md.")


def write_records(directory, num_records, seq_length, predictions, num_files=4):
  """Writes num_records random pretraining examples; returns the file glob."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import constants  # pylint: disable=g-import-not-at-top
  pattern = os.path.join(directory, f"random-s{seq_length}-p{predictions}-*.tfrecord")
  if len(tf.io.gfile.glob(pattern)) == num_files:
    return pattern
  os.makedirs(directory, exist_ok=True)
  per_file = num_records // num_files

  def ints(v):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x) for x in v]))

  for i in range(num_files):
    batch = protocol.pretraining_batch(per_file, seq_length, predictions, seed=100 + i)
    path = os.path.join(directory, f"random-s{seq_length}-p{predictions}-{i:03d}.tfrecord")
    with tf.io.TFRecordWriter(path + ".tmp") as writer:
      for j in range(per_file):
        feature = {
            constants.TFRECORD_INPUT_IDS: ints(batch["input_word_ids"][j]),
            constants.TFRECORD_INPUT_MASK: ints(batch["input_mask"][j]),
            constants.TFRECORD_SEGMENT_IDS: ints(batch["input_type_ids"][j]),
            constants.TFRECORD_MASKED_LM_POSITIONS: ints(batch["masked_lm_positions"][j]),
            constants.TFRECORD_MASKED_LM_IDS: ints(batch["masked_lm_ids"][j]),
            constants.TFRECORD_MASKED_LM_WEIGHTS: tf.train.Feature(
                float_list=tf.train.FloatList(value=batch["masked_lm_weights"][j])),
            constants.TFRECORD_NEXT_SENTENCE_LABELS: ints(
                [batch["next_sentence_labels"][j]]),
        }
        writer.write(tf.train.Example(
            features=tf.train.Features(feature=feature)).SerializeToString())
    os.replace(path + ".tmp", path)
  return pattern


def main(argv):
  del argv
  pattern = write_records(FLAGS.record_dir, FLAGS.num_records, FLAGS.seq_length,
                          FLAGS.predictions)
  shape = ["--size", FLAGS.size, "--batch_size", str(FLAGS.batch_size),
           "--seq_length", str(FLAGS.seq_length), "--predictions", str(FLAGS.predictions)]
  env = {"CUDA_VISIBLE_DEVICES": ""}
  specs = [("in_memory", [sys.executable, "bench/ours_pretraining_worker.py", *shape], env),
           ("tfrecord", [sys.executable, "bench/ours_pretraining_worker.py", *shape,
                         "--input_path", pattern], env)]
  workers = common.start_sequential(specs)
  common.alternate(workers, FLAGS.rounds, FLAGS.steps_per_round)
  memory, records = (common.median(w.step_seconds) for w in workers)
  overhead = records / memory - 1.0
  command = common.command_line()
  verdict = "met" if overhead <= 0.03 else "NOT met"
  line = (f"{FLAGS.size} batch {FLAGS.batch_size} seq {FLAGS.seq_length}: in-memory "
          f"{memory * 1000:.0f} ms/step, TFRecords {records * 1000:.0f} ms/step, "
          f"overhead {100 * overhead:+.1f}% (target <= 3%: {verdict})")
  print(line)
  common.write_results("input_pipeline", {"command": command, "in_memory_step_s": memory,
                                          "tfrecord_step_s": records, "overhead": overhead})
  if FLAGS.write_readme:
    common.update_readme_section("input_pipeline", f"Command: `{command}`\n\n{line}")
  print(f"input_pipeline: overhead {100 * overhead:+.1f}%; command: {command}")


if __name__ == "__main__":
  app.run(main)
