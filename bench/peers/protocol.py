"""The worker side of the interleaved benchmark, shared by our worker and the peers'.

Needs only the standard library, numpy and bert_tf.constants (which imports nothing),
because it runs inside each peer's own virtual environment. A worker builds its model, runs its warm-up steps, prints one
`READY {json}` line, then answers commands read from stdin, one per line:

  run N    runs N timed steps and prints `RESULT {"step_seconds": [...],
           "cpu_seconds": [...]}` (wall-clock and process CPU time per step)
  quit     prints `DONE {"peak_rss_mb": ...}` and exits

The driver (bench/driver.py) starts one worker per system and sends `run` to each in
turn, so that ours and the peers' steps alternate on the same (noisy) machine.
"""

import argparse
import json
import os
import resource
import sys
import time

import numpy as np

# Imports nothing itself: the peers' environments lack this library's dependencies.
from bert_tf.constants import ENCODER_SIZES

VOCAB_SIZE = 30522
LEARNING_RATE = 1e-4
WEIGHT_DECAY = 0.01
# The precisions a peer trains in (Keras's policy names).
MIXED_PRECISION_POLICIES = ("float32", "mixed_bfloat16")


def argument_parser(description, precisions=MIXED_PRECISION_POLICIES):
  """The command line every pretraining worker takes: the model size, batch shape and
  precision (one of `precisions`). A worker adds its own flags to the parser returned."""
  parser = argparse.ArgumentParser(description=description)
  parser.add_argument("--size", default="mini")
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--seq_length", type=int, default=128)
  parser.add_argument("--intra_op_threads", type=int, default=0,
                      help="Threads of one op (0: the framework's default; torch: "
                      "every core).")
  parser.add_argument("--inter_op_threads", type=int, default=0,
                      help="Ops run at once (0: the framework's default).")
  parser.add_argument("--predictions", type=int, default=20)
  parser.add_argument("--full_length", type=int, default=1,
                      help="0: random lengths in [seq_length / 2, seq_length].")
  parser.add_argument("--mixed_precision", default="float32",
                      choices=precisions,
                      help="mixed_bfloat16: bf16 products, float32 variables (Keras's "
                      "policy; torch's bf16 autocast).")
  return parser


def start_worker(description, framework):
  """(args, thread_info) of a worker that takes the command line of argument_parser
  as it is: the arguments parsed, and `framework`'s threads set (set_threads)."""
  args = argument_parser(description).parse_args()
  return args, set_threads(args, framework)


def set_threads(args, framework):
  """Applies --intra_op_threads/--inter_op_threads to `framework` (the imported
  tensorflow or torch module) before its first op.

  Returns:
    Entries for the READY info: {"threads": "intra/inter"} as the framework then runs,
    and for TensorFlow the oneDNN variable it was started with. torch gets one thread per core when not told: its best setting for one
  training step (its own default counts physical cores, which a VM may report wrong)."""
  if framework.__name__ == "torch":
    framework.set_num_threads(args.intra_op_threads or os.cpu_count() or 1)
    if args.inter_op_threads:
      framework.set_num_interop_threads(args.inter_op_threads)
    return {"threads": f"{framework.get_num_threads()}/{framework.get_num_interop_threads()}"}
  threading = framework.config.threading
  if args.intra_op_threads:
    threading.set_intra_op_parallelism_threads(args.intra_op_threads)
  if args.inter_op_threads:
    threading.set_inter_op_parallelism_threads(args.inter_op_threads)
  return {"threads": f"{threading.get_intra_op_parallelism_threads() or 'default'}/"
                     f"{threading.get_inter_op_parallelism_threads() or 'default'}",
          "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset")}


def size_args(size):
  """(num_layers, hidden, heads, intermediate) of a named size."""
  layers, hidden, heads = ENCODER_SIZES[size]
  return layers, hidden, heads, 4 * hidden


def pretraining_batch(batch_size, seq_length, max_predictions, vocab_size=VOCAB_SIZE,
                      seed=0, full_length=True):
  """A pretraining batch of random ids as numpy arrays (identical for every system).

  Sequences are full length (no padding) unless full_length is False, in which case
  each has a random length in [seq_length // 2, seq_length]. Every sequence has
  `max_predictions` distinct, sorted masked positions (all real, weight 1).

  Returns:
    dict of int32 [B, T] input_word_ids, input_mask, input_type_ids; int32 [B, P]
    masked_lm_positions, masked_lm_ids; float32 [B, P] masked_lm_weights; int32 [B]
    next_sentence_labels.
  """
  rng = np.random.RandomState(seed)
  if full_length:
    lengths = np.full([batch_size], seq_length)
  else:
    lengths = rng.randint(seq_length // 2, seq_length + 1, size=[batch_size])
  positions = np.arange(seq_length)[None, :]
  mask = (positions < lengths[:, None]).astype(np.int32)
  ids = rng.randint(5, vocab_size, size=[batch_size, seq_length]).astype(np.int32) * mask
  type_ids = ((positions >= (lengths // 2)[:, None]) & (mask > 0)).astype(np.int32)
  masked_positions = np.stack([
      np.sort(rng.choice(np.arange(1, length - 1), max_predictions, replace=False))
      for length in lengths]).astype(np.int32)
  masked_ids = np.take_along_axis(ids, masked_positions, axis=1)
  return {
      "input_word_ids": ids,
      "input_mask": mask,
      "input_type_ids": type_ids,
      "masked_lm_positions": masked_positions,
      "masked_lm_ids": masked_ids.astype(np.int32),
      "masked_lm_weights": np.ones([batch_size, max_predictions], np.float32),
      "next_sentence_labels": rng.randint(0, 2, size=[batch_size]).astype(np.int32),
  }


def tf_pretraining_loss(tf, losses, batch, mlm_logits, nsp_logits):
  """The original release's pretraining loss, for the TensorFlow peers: the masked-LM
  cross-entropy averaged over the weighted positions plus the next-sentence one.

  Args:
    tf: the tensorflow module; losses: the peer's Keras losses module (keras.losses or
      tf_keras.losses), both passed in so that this module imports neither.
    batch: a pretraining_batch as tensors.
    mlm_logits: [B, P, V]; nsp_logits: [B, 2] (bf16 under mixed_bfloat16: taken in
      float32, as the policy's users do).
  """
  mlm_logits = tf.cast(mlm_logits, tf.float32)
  nsp_logits = tf.cast(nsp_logits, tf.float32)
  per_position = losses.sparse_categorical_crossentropy(
      batch["masked_lm_ids"], mlm_logits, from_logits=True)
  weights = batch["masked_lm_weights"]
  mlm_loss = tf.reduce_sum(per_position * weights) / (tf.reduce_sum(weights) + 1e-5)
  nsp_loss = tf.reduce_mean(losses.sparse_categorical_crossentropy(
      batch["next_sentence_labels"], nsp_logits, from_logits=True))
  return mlm_loss + nsp_loss


def serve_tf_training(tf, loss_fn, variables, optimizer, info):
  """Serves (see serve) a TensorFlow peer's training step: a tf.function taking the
  gradient of loss_fn() with a GradientTape and applying it with `optimizer`; READY
  says `info` and the parameter count of `variables`."""

  @tf.function
  def train_step():
    with tf.GradientTape() as tape:
      loss = loss_fn()
    grads = tape.gradient(loss, variables)
    optimizer.apply_gradients(zip(grads, variables))
    return loss

  def step():
    float(train_step())

  serve(step, warmup_steps=2,
        info={**info, "params": sum(int(tf.size(v)) for v in variables)})


# The arrays of a serving run (bench/int8_serving.py writes them, every worker reads
# them): token ids [N, T] under "<set>_input_word_ids", "<set>_input_mask" and
# "<set>_input_type_ids" for each set: "timing" (the timed batches' rows), "agreement"
# (rows with padding whose log-probabilities every system returns), "calibration" (the
# static quantizers' rows) and, with a GLUE task, "dev" (with "dev_labels").
TOKEN_ID_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
SCORED_SETS = ("agreement", "dev")


def token_ids(arrays, name, rows=None):
  """(input_word_ids, input_mask, input_type_ids) int32 [rows, T] of set `name`."""
  return tuple(arrays[f"{name}_{key}"][:rows] for key in TOKEN_ID_NAMES)


def log_softmax(logits):
  """float32 [B, C] log-probabilities of logits [B, C] (numpy)."""
  logits = np.asarray(logits, np.float64)
  shifted = logits - logits.max(axis=-1, keepdims=True)
  return (shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))).astype(np.float32)


def serve_classifier(predict, args, info):
  """Serves (see serve) a classifier on the arrays of --inputs: first writes the
  log-probabilities of each SCORED_SETS set present to --outputs (when given, as
  "<set>_log_probs" float32 [N, C], in batches of 32), then times one call of `predict`
  on the first --batch_size rows of the "timing" set per step.

  Args:
    predict: callable(input_word_ids, input_mask, input_type_ids), int32 numpy [B, T]
      each, returning logits or log-probabilities float [B, C] as numpy.
    args: the worker's parsed serving_argument_parser flags.
    info: READY entries (the system, its versions and model size).
  """
  arrays = dict(np.load(args.inputs))
  if args.outputs:
    scores = {}
    for name in SCORED_SETS:
      if f"{name}_input_word_ids" not in arrays:
        continue
      ids = token_ids(arrays, name)
      scores[f"{name}_log_probs"] = np.concatenate([
          log_softmax(predict(*(a[i:i + 32] for a in ids)))
          for i in range(0, len(ids[0]), 32)])
    partial = args.outputs + ".partial.npz"
    np.savez(partial, **scores)
    os.replace(partial, args.outputs)
  batch = token_ids(arrays, "timing", args.batch_size)
  serve(lambda: predict(*batch), warmup_steps=2, info=info)


def serving_argument_parser(description):
  """The command line of a serving worker (serve_classifier)."""
  parser = argparse.ArgumentParser(description=description)
  parser.add_argument("--inputs", required=True, help="The run's arrays (.npz).")
  parser.add_argument("--outputs", default="", help="Where to write the log-probabilities.")
  parser.add_argument("--batch_size", type=int, default=1, help="Rows per timed call.")
  parser.add_argument("--threads", type=int, default=0,
                      help="Threads of one call (0: the framework's default).")
  return parser


def peak_rss_mb():
  """This process's peak resident memory in MiB (ru_maxrss is KiB on Linux)."""
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def emit(tag, payload):
  """Prints the `TAG {json}` line a driver reads (tagged_payload)."""
  sys.stdout.write(f"{tag} {json.dumps(payload)}\n")
  sys.stdout.flush()


def tagged_payload(line, tag):
  """The payload of a `TAG {json}` line (emit); None for any other line."""
  return json.loads(line[len(tag) + 1:]) if line.startswith(tag + " ") else None


def last_payload(stdout, tag):
  """The payload of the last `TAG {json}` line in a worker's stdout; None without one."""
  found = [tagged_payload(line, tag) for line in stdout.splitlines()]
  return next((p for p in reversed(found) if p is not None), None)


def serve(step_fn, warmup_steps=2, info=None, sync=None):
  """Warms up, then runs the command loop on stdin/stdout.

  Args:
    step_fn: callable running one full step (or one loop of `steps_per_call` steps,
      see info) and blocking until it is done.
    warmup_steps: untimed calls before READY (tracing, compilation, allocation).
    info: dict printed with READY (framework versions, parameter count, ...);
      `steps_per_call` in it says how many steps one call of step_fn runs.
    sync: optional callable that waits for pending device work.
  """
  info = dict(info or {})
  steps_per_call = int(info.get("steps_per_call", 1))
  start = time.perf_counter()
  for _ in range(warmup_steps):
    step_fn()
  if sync:
    sync()
  info["warmup_seconds"] = time.perf_counter() - start
  emit("READY", info)
  for line in sys.stdin:
    parts = line.split()
    if not parts:
      continue
    if parts[0] == "run":
      calls = max(1, int(parts[1]) // steps_per_call)
      seconds, cpu_seconds = [], []
      for _ in range(calls):
        t0, c0 = time.perf_counter(), time.process_time()
        step_fn()
        if sync:
          sync()
        seconds.append((time.perf_counter() - t0) / steps_per_call)
        cpu_seconds.append((time.process_time() - c0) / steps_per_call)
      emit("RESULT", {"step_seconds": seconds, "cpu_seconds": cpu_seconds})
    elif parts[0] == "quit":
      break
  emit("DONE", {"peak_rss_mb": peak_rss_mb()})
