"""The trainer's policies, run on one engine (in tests/engine_worker.py's process) and
checked on both by tests/integration/test_trainer_policies.py.

The scenarios read pretraining TFRecords that the test writes (`write_records`) in
file order: NaN masked-LM weights from one record on, or a record whose bytes are
damaged, reach the trainer at a known step on either engine.
"""

import glob
import os

import keras
import numpy as np

import trainer_helpers
from bert_tf.checkpoints import portable
from bert_tf.training import experiments
from bert_tf.training import host_loop
from bert_tf.training import trainer as trainer_lib
from bert_tf.utils import errors

BATCH = 8
SEQ = 16
PREDICTIONS = 4
RECORDS = 96
# Batches 5 and later (records 32...) carry NaN masked-LM weights.
NAN_FROM_RECORD = 32
# The record whose bytes are damaged: inside the 7th batch.
CORRUPT_RECORD = 52
# The length of the runs that move between engines.
MOVE_STEPS = 8


def write_records(path: str, nan_from: int = RECORDS, corrupt: int = -1,
                  seed: int = 0) -> int:
  """Writes RECORDS pretraining examples (random ids drawn from `seed`) to `path`;
  records from `nan_from` on have NaN masked_lm_weights, and record `corrupt` a damaged
  data byte. Returns the byte offset of the damaged record (-1 when none)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.data.records import tfrecords  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  offsets, records = [], []
  offset = 0
  for i in range(RECORDS):
    weights = np.ones(PREDICTIONS, np.float32) * (np.nan if i >= nan_from else 1.0)
    record = tfrecords.serialize_example({
        "input_ids": rng.integers(5, 100, SEQ), "input_mask": np.ones(SEQ, np.int64),
        "segment_ids": np.repeat([0, 1], SEQ // 2),
        "masked_lm_positions": np.arange(1, PREDICTIONS + 1),
        "masked_lm_ids": rng.integers(5, 100, PREDICTIONS),
        "masked_lm_weights": weights, "next_sentence_labels": [i % 2]})
    offsets.append(offset)
    offset += len(record) + 16  # Length, its CRC, the data, its CRC.
    records.append(record)
  with tf.io.TFRecordWriter(path) as writer:
    for record in records:
      writer.write(record)
  if corrupt < 0:
    return -1
  with open(path, "r+b") as f:
    f.seek(offsets[corrupt] + 12 + 5)
    byte = f.read(1)
    f.seek(offsets[corrupt] + 12 + 5)
    f.write(bytes([byte[0] ^ 0xFF]))
  return offsets[corrupt]


def _experiment(records: str, steps: int, dropout: float = 0.0, shuffled: bool = False,
                **trainer):
  """A tiny pretraining experiment reading `records` (comma-separated files) in file
  order, or `shuffled` as the default input settings shuffle them (deterministic
  kernels then)."""
  data = dict(format="tfrecord", input_path=records, global_batch_size=BATCH,
              seq_length=SEQ, max_predictions_per_seq=PREDICTIONS)
  if not shuffled:
    data.update(shuffle_buffer_size=1)
  return experiments.experiment_from_dict(trainer_helpers.tiny_experiment_dict(
      steps=steps, train_data=data, eval_data=dict(data, is_training=False),
      runtime=dict(deterministic=shuffled),
      optimizer=dict(warmup_steps=0),
      model=dict(encoder=dict(dropout_rate=dropout, attention_dropout_rate=dropout)),
      trainer=dict(dict(steps_per_loop=2, checkpoint_interval=2), **trainer)))


def _run(experiment, model_dir, steps=None):
  """Trains in model_dir with a fresh trainer (as a new process would)."""
  keras.backend.clear_session()
  trainer = trainer_lib.Trainer(experiment, model_dir, log_fn=lambda _: None)
  trainer.train(train_steps=steps)
  return trainer


def largest_difference(a: dict, b: dict, prefix: str = "") -> float:
  """The largest absolute difference between the arrays named prefix... of a and b."""
  a = {k: v for k, v in a.items() if k.startswith(prefix)}
  b = {k: v for k, v in b.items() if k.startswith(prefix)}
  assert a.keys() == b.keys(), sorted(set(a) ^ set(b))
  return max(float(np.max(np.abs(a[k].astype(np.float64) - b[k].astype(np.float64))))
             for k in a)


def resume(out_dir: str, records: str) -> dict:
  """6 steps with dropout at once, and 4 steps then a resumed run to 6."""
  experiment = _experiment(records, 6, dropout=0.1)
  _run(experiment, os.path.join(out_dir, "straight"))
  _run(experiment, os.path.join(out_dir, "resumed"), steps=4)
  resumed = _run(experiment, os.path.join(out_dir, "resumed"))
  return {"restored_from": os.path.basename(resumed.restored_from), "step": resumed.step,
          "difference": largest_difference(
              portable.arrays(os.path.join(out_dir, "straight", "ckpt-6.h5")),
              portable.arrays(os.path.join(out_dir, "resumed", "ckpt-6.h5")))}


def non_finite_loss(out_dir: str, records: str) -> dict:
  """8 steps over records whose weights turn NaN at step 5."""
  model_dir = os.path.join(out_dir, "nan")
  experiment = _experiment(records, 8)
  keras.backend.clear_session()
  trainer = trainer_lib.Trainer(experiment, model_dir, log_fn=lambda _: None)
  try:
    trainer.train()
    return {"error": None}
  except host_loop.NonFiniteLossError as e:
    message = str(e)
  trainer.engine.checkpoint_state()
  in_memory = {v.path: np.asarray(v.numpy()) for v in trainer.model.trainable_variables}
  saved = portable.arrays(os.path.join(model_dir, "ckpt-4.h5"))
  finite = all(np.all(np.isfinite(v)) for v in saved.values() if v.dtype.kind == "f")
  unchanged = max(float(np.max(np.abs(value - saved[f"items/{item}/{path}"])))
                  for path, value in in_memory.items()
                  for item in ("encoder", "masked_lm", "next_sentence")
                  if f"items/{item}/{path}" in saved)
  return {"error": message, "checkpoints": sorted(os.path.basename(p) for p in glob.glob(
      os.path.join(model_dir, "ckpt-*.h5"))), "saved_finite": finite,
          "in_memory_minus_saved": unchanged}


def corrupt_record(out_dir: str, records: str) -> dict:
  """8 steps over records of which the 53rd (in the 7th batch) is damaged."""
  model_dir = os.path.join(out_dir, "corrupt")
  experiment = _experiment(records, 8)
  try:
    _run(experiment, model_dir)
    return {"error": None}
  except Exception as e:  # pylint: disable=broad-except
    error = e
  return {"error": str(error), "type": type(error).__name__,
          "user_error": errors.user_message(error) is not None,
          "checkpoints": sorted(os.path.basename(p) for p in glob.glob(
              os.path.join(model_dir, "ckpt-*.h5")))}


def train_to(records: str, *runs: str, shuffled: bool = False) -> dict:
  """Trains each MODEL_DIR STEPS pair of `runs` in turn (resuming from what the model
  dir holds, whichever engine wrote it) on the clean records, without dropout, reading
  in file order (or `shuffled`), a summary every step; returns {model_dir: the step
  reached}."""
  reached = {}
  for model_dir, steps in zip(runs[::2], runs[1::2]):
    experiment = _experiment(records, MOVE_STEPS, shuffled=shuffled, summary_interval=1,
                             log_interval=1, steps_per_loop=1)
    reached[model_dir] = _run(experiment, model_dir, steps=int(steps)).step
  return reached


def shuffled_train_to(records: str, *runs: str) -> dict:
  """train_to with the records shuffled by the default input settings."""
  return train_to(records, *runs, shuffled=True)


def write_tsv(path: str, seed: int = 0, rows: int = 40) -> str:
  """A GLUE-style TSV (sentence, label) of `rows` sentences of tiny_vocab's words."""
  rng = np.random.default_rng(seed)
  words = ["red", "blue", "green", "dog", "man", "home", "mat", "the", "cat"]
  lines = ["sentence\tlabel"] + [f"{' '.join(rng.choice(words, rng.integers(2, 12)))}\t{i % 2}"
                                 for i in range(rows)]
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return path


def tsv_train_to(tsv_files: str, vocab: str, *runs: str) -> dict:
  """train_to for sentence_prediction on raw TSV files (comma-separated) tokenized with
  `vocab`, shuffled by the default input settings."""
  reached = {}
  for model_dir, steps in zip(runs[::2], runs[1::2]):
    data = dict(format="tsv", input_path=tsv_files, global_batch_size=BATCH,
                seq_length=SEQ)
    experiment = experiments.experiment_from_dict(trainer_helpers.tiny_experiment_dict(
        steps=MOVE_STEPS, train_data=data, eval_data=dict(data, is_training=False),
        task=dict(name="sentence_prediction", num_classes=2, text_a_column="sentence"),
        tokenizer=dict(vocab_file=vocab), runtime=dict(deterministic=True),
        optimizer=dict(warmup_steps=0),
        model=dict(encoder=dict(dropout_rate=0.0, attention_dropout_rate=0.0),
                   head_dropout_rate=0.0),
        trainer=dict(steps_per_loop=1, checkpoint_interval=2, summary_interval=1,
                     log_interval=1)))
    reached[model_dir] = _run(experiment, model_dir, steps=int(steps)).step
  return reached


def run_all(out_dir: str, records_dir: str) -> dict:
  """Every scenario, on the engine of this process's Keras backend."""
  return {
      "backend": keras.backend.backend(),
      "resume": resume(out_dir, os.path.join(records_dir, "clean.tfrecord")),
      "non_finite_loss": non_finite_loss(out_dir, os.path.join(records_dir, "nan.tfrecord")),
      "corrupt_record": corrupt_record(out_dir,
                                       os.path.join(records_dir, "corrupt.tfrecord")),
  }
