"""Resuming costs the same at step 100 and at step 100,000: the checkpoint holds the
input iterator, so the resumed run reads no consumed batch.

  python -m bench.resume_time [--steps=100,100000] [--skip_reference]

Writes a small corpus and its pretraining TFRecords (bert_tf.data.creation.create_pretraining_data)
into a temporary directory, then for each step count N:
  * trains BERT-tiny for min(N, 100) steps on them (OneDeviceStrategy, default shuffle
    buffer, dynamic masking), then, for N > 100, advances the same training input
    iterator by the remaining N - 100 batches in a graph loop (every batch read, parsed
    and masked, no training step) and sets the step to N: the checkpoint it saves is
    that of a run at step N, whose input has consumed N batches, without the cost of
    training N steps;
  * resumes in a fresh Trainer: restores the checkpoint, rebuilds the input at the
    saved position and runs one training step; the time from Trainer construction to the
    end of that step is the resume time (tracing included, the same at every N; the
    best of two resumes).
It also prints the size of the input iterator's checkpointed state. --skip_reference
also times the fallback that skips the consumed batches (what resuming did before).
"""

import argparse
import os
import random
import shutil
import tempfile
import time

from bert_tf import cpu_kernels

cpu_kernels.prefer_onednn()
cpu_kernels.leave_out_absent_gpus()

import keras  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

from bert_tf import constants  # pylint: disable=g-import-not-at-top
from bert_tf.data.creation import create_pretraining_data as cpd  # pylint: disable=g-import-not-at-top
from bert_tf.data.records import pretraining_format  # pylint: disable=g-import-not-at-top
from bert_tf.tasks import base as task_base  # pylint: disable=g-import-not-at-top
from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
from bert_tf.training.trainer import Trainer  # pylint: disable=g-import-not-at-top

WORDS = ("the a cat dog sat on mat ran far big small red blue house tree sky sun moon and "
         "or but if then when where who what why how is was are were green river stone "
         "cloud rain snow wind fire water light dark old new").split()
SEQ, PREDICTIONS, BATCH = 128, 20, 8


def write_data(directory: str) -> str:
  vocab = os.path.join(directory, "vocab.txt")
  with open(vocab, "w", encoding="utf-8") as f:
    f.write("\n".join(list(constants.SPECIAL_TOKENS) + [".", ","] + WORDS) + "\n")
  rng = random.Random(0)
  corpus = os.path.join(directory, "corpus.txt")
  with open(corpus, "w", encoding="utf-8") as f:
    for _ in range(400):
      for _ in range(rng.randint(4, 20)):
        f.write(" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 25))) + ".\n")
      f.write("\n")
  settings = pretraining_format.PretrainingDataSettings(
      max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, dupe_factor=3)
  output = os.path.join(directory, "train.tfrecord")
  summary = cpd.create_pretraining_data(corpus, vocab, output, settings, num_shards=4,
                                        progress=False)
  print(f"{summary.get('num_instances', summary.get('instances', '?'))} training "
        f"examples in 4 files")
  return vocab


def experiment(directory: str, vocab: str):
  data = dict(format="tfrecord", input_path=os.path.join(directory, "train*.tfrecord*"),
              seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, global_batch_size=BATCH,
              dynamic_masking=True, vocab_file=vocab)
  return experiments.experiment_from_dict(dict(
      task=dict(name="pretraining"),
      model=dict(encoder=dict(vocab_size=len(WORDS) + 10, hidden_size=32, num_layers=2,
                              num_attention_heads=2, intermediate_size=64,
                              max_position_embeddings=SEQ)),
      train_data=data, eval_data=dict(data, is_training=False),
      trainer=dict(train_steps=10**9, steps_per_loop=50, checkpoint_interval=10**9,
                   summary_interval=10**9, log_interval=10**9),
      runtime=dict(distribution_strategy="one_device", deterministic=True, seed=1)))


def checkpoint_at(config, model_dir: str, steps: int) -> None:
  """A checkpoint at `steps` whose input iterator has consumed `steps` batches."""
  keras.backend.clear_session()
  trainer = Trainer(config, model_dir, log_fn=lambda _: None)
  trained = min(steps, 100)
  trainer.train(train_steps=trained)
  if steps > trained:
    iterator = trainer.checkpoint.iterator[0]

    @tf.function
    def advance(n):
      for _ in tf.range(n):
        next(iterator)

    start = time.time()
    advance(tf.constant(steps - trained))
    trainer.step.assign(steps)
    tf.train.CheckpointManager(trainer.checkpoint, model_dir, max_to_keep=3).save(
        checkpoint_number=steps)
    print(f"  advanced the input by {steps - trained} batches in "
          f"{time.time() - start:.1f}s")


def resume_seconds(config, model_dir: str, steps: int) -> float:
  # A copy: the resumed run saves at steps + 1, and the next resume must start at steps.
  copy = model_dir + f"_resumed_{time.time_ns()}"
  shutil.copytree(model_dir, copy)
  keras.backend.clear_session()
  start = time.time()
  trainer = Trainer(config, copy, log_fn=lambda _: None)
  trainer.train(train_steps=steps + 1)
  assert trainer.restored_from.endswith(f"ckpt-{steps}"), trainer.restored_from
  return time.time() - start


def iterator_state_bytes(config, model_dir: str) -> int:
  keras.backend.clear_session()
  trainer = Trainer(config, model_dir, log_fn=lambda _: None)
  trainer.train(train_steps=int(tf.train.latest_checkpoint(model_dir).rsplit("-", 1)[1]) + 1)
  prefix = tf.train.Checkpoint(iterator=trainer.checkpoint.iterator).write(
      os.path.join(model_dir, "iterator_only", "state"))
  return sum(os.path.getsize(p) for p in tf.io.gfile.glob(prefix + ".*"))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--steps", default="100,100000")
  parser.add_argument("--skip_reference", action="store_true")
  args = parser.parse_args()
  with tempfile.TemporaryDirectory() as directory:
    vocab = write_data(directory)
    config = experiment(directory, vocab)
    times = {}
    for steps in [int(s) for s in args.steps.split(",")]:
      model_dir = os.path.join(directory, f"run_{steps}")
      checkpoint_at(config, model_dir, steps)
      # The best of two: the first resume of the process also pays one-time start-ups.
      times[steps] = min(resume_seconds(config, model_dir, steps) for _ in range(2))
      print(f"resume at step {steps}: {times[steps]:.2f}s")
      if args.skip_reference:
        # What resuming without a checkpointed iterator does: skip the consumed batches.
        dataset = task_base.get_task(config).data_loader(config.train_data).dataset(None)
        start = time.time()
        next(iter(dataset.skip(steps)))
        print(f"  skipping the {steps} consumed batches instead: {time.time() - start:.2f}s")
    print(f"iterator state (shuffle buffer {config.train_data.shuffle_buffer_size}, "
          f"seq {SEQ}): {iterator_state_bytes(config, model_dir) / 2**20:.1f} MiB")
    if len(times) == 2:
      low, high = sorted(times)
      print(f"ratio resume@{high} / resume@{low}: {times[high] / times[low]:.2f}")


if __name__ == "__main__":
  main()
