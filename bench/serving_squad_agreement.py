"""Served vs evaluated SQuAD answers on contexts longer than one window, and latency.

Agreement: for the SQuAD 1.1 dev questions whose context does not fit one window
(more than one doc_stride window), the SQuAD export's raw-text answer is compared
with the answer of the evaluation path (windows by bert_tf.data.task_files.squad, the model on
them, bert_tf.data.task_files.squad_postprocess) for the same weights: either a predictions.json
written by evaluation (--predictions) or computed here. Without --checkpoint the
model is untrained: agreement needs only the same weights on both sides.

Latency (--latency_rounds > 0): the windowed export's raw-text call against the
same call on contexts cut to their first window, batch 1 and 32, median of
interleaved runs; and the latency ratio divided by the windows per question (1.0:
the cost grows exactly with the windows). Random weights are enough for latency
(--skip_agreement); the load average is printed before and after, the machine
being shared.

Usage:
  python -m bench.serving_squad_agreement --data_dir=$BERT_TF_DATA [--config=params.yaml
    --checkpoint=MODEL_DIR] [--predictions=predictions.json] [--limit=N]
  python -m bench.serving_squad_agreement --data_dir=$BERT_TF_DATA --skip_agreement \
    --limit=64 --latency_rounds=3 --latency_batches=1,32  # BERT-base shape, seq 384
"""

import argparse
import json
import os
import statistics
import time

import numpy as np
import tensorflow as tf

from bert_tf.data.task_files import squad as squad_data
from bert_tf.data.pipelines import squad_features
from bert_tf.export import exporter
from bert_tf.export import squad_serving
from bert_tf.tasks import base
from bert_tf.training import experiments


def _experiment(args, vocab):
  if args.config:
    return exporter.load_experiment(args.config)
  encoder = dict(vocab_size=30522, hidden_size=args.hidden_size, num_layers=args.num_layers,
                 num_attention_heads=max(1, args.hidden_size // 64),
                 intermediate_size=4 * args.hidden_size, max_position_embeddings=512)
  data = {"seq_length": args.seq_length}
  return exporter.load_experiment(experiments.experiment_from_dict({
      "task": {"name": "squad"}, "model": {"encoder": encoder},
      "tokenizer": {"vocab_file": vocab, "lower_case": True},
      "train_data": data, "eval_data": dict(data, is_training=False)}))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data_dir", default=os.environ.get("BERT_TF_DATA", "../shared/data"))
  parser.add_argument("--config", default="")
  parser.add_argument("--checkpoint", default="")
  parser.add_argument("--predictions", default="")
  parser.add_argument("--predict_file", default="",
                      help="SQuAD JSON to use (default: the kit's dev-v1.1.json)")
  parser.add_argument("--limit", type=int, default=0, help="long questions to use (0: all)")
  parser.add_argument("--seq_length", type=int, default=384)
  parser.add_argument("--hidden_size", type=int, default=768)
  parser.add_argument("--num_layers", type=int, default=12)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--latency_rounds", type=int, default=0)
  parser.add_argument("--latency_batches", default="1,32",
                      help="comma-separated batch sizes of the latency runs")
  parser.add_argument("--skip_agreement", action="store_true",
                      help="only the latency (random weights are fine for it)")
  args = parser.parse_args()
  print(f"load average at start: {_load()}")
  vocab = os.path.join(args.data_dir, "bert_vocab", "uncased", "vocab.txt")
  dev = args.predict_file or os.path.join(args.data_dir, "squad_v1.1", "dev-v1.1.json")
  experiment = _experiment(args, vocab).override({"task": {"predict_file": dev}})
  task = base.get_task(experiment)
  model = (exporter.model_from_checkpoint(experiment, args.checkpoint) if args.checkpoint
           else task.build_model())
  vocab = experiment.tokenizer.vocab_file or vocab
  module = exporter.build_serving_module(experiment, model, vocab)
  examples, features = task.eval_set(dev, experiment.eval_data)
  windows = np.bincount([f.example_index for f in features], minlength=len(examples))
  long_ids = {examples[i].qas_id for i in np.flatnonzero(windows > 1)}
  if args.limit:
    long_ids = set(sorted(long_ids)[:args.limit])
  questions, contexts, ids = [], [], []
  for article in squad_data.load_squad_json(dev):
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        if qa["id"] in long_ids:
          ids.append(qa["id"])
          questions.append(qa["question"])
          contexts.append(paragraph["context"])
  predict = tf.function(module.predict_text, autograph=False)
  if args.skip_agreement:
    _latency(module, predict, questions, contexts, args)
    return
  if args.predictions:
    with open(args.predictions, encoding="utf-8") as f:
      evaluated = json.load(f)
  else:
    keep = [f for f in features if examples[f.example_index].qas_id in long_ids]
    arrays = squad_features.features_to_arrays(keep)
    values = {k: [] for k in ("unique_ids", "start_logits", "end_logits")}
    for start in range(0, len(keep), args.batch_size):
      batch = {k: v[start:start + args.batch_size] for k, v in arrays.items()}
      out = module.call_model(batch)
      values["unique_ids"].append(batch["unique_ids"])
      values["start_logits"].append(out["start_logits"].numpy())
      values["end_logits"].append(out["end_logits"].numpy())
    evaluated = task.postprocess({k: np.concatenate(v) for k, v in values.items()}).predictions
  served = []
  for start in range(0, len(ids), args.batch_size):
    out = predict({"question": tf.constant(questions[start:start + args.batch_size]),
                   "context": tf.constant(contexts[start:start + args.batch_size])})
    served += [t.decode("utf-8") for t in out[squad_serving.ANSWER_TEXT].numpy()]
  differ = [(q, evaluated[q], s) for q, s in zip(ids, served)
            if s != evaluated[q] and not (s == "" and evaluated[q] == "empty")]
  print(f"long-context questions: {len(ids)}; served == evaluated: {len(ids) - len(differ)} "
        f"({100 * (1 - len(differ) / max(len(ids), 1)):.2f}%)")
  for qid, want, got in differ[:20]:
    print(f"  {qid}: evaluated {want!r} served {got!r}")
  if args.latency_rounds:
    _latency(module, predict, questions, contexts, args)


def _latency(module, predict, questions, contexts, args):
  """Windowed vs first-window latency, medians of interleaved runs."""
  for batch in (int(b) for b in args.latency_batches.split(",")):
    q = tf.constant((questions * batch)[:batch])
    c = tf.constant((contexts * batch)[:batch])
    # The first window's text: the context up to the end byte of its last piece.
    w = module._windows({"question": q, "context": c})  # pylint: disable=protected-access
    first_window = tf.cumsum(w["num_windows"], exclusive=True)
    last_piece = w["end"].row_starts() + tf.gather(w["window_length"], first_window) - 1
    length = tf.cast(tf.gather(w["end"].flat_values, last_piece), tf.int32)
    c1 = tf.strings.substr(c, tf.zeros_like(length), length)
    timings = {"windowed": [], "first_window": []}
    for _ in range(args.latency_rounds + 1):
      for name, ctx in (("windowed", c), ("first_window", c1)):
        t0 = time.perf_counter()
        out = predict({"question": q, "context": ctx})
        out[squad_serving.SCORE].numpy()
        timings[name].append(time.perf_counter() - t0)
    windows = float(np.mean(w["num_windows"].numpy()))
    med = {k: statistics.median(v[1:]) for k, v in timings.items()}
    ratio = med["windowed"] / med["first_window"]
    print(f"batch {batch}: windowed {1e3 * med['windowed']:.1f} ms, first window "
          f"{1e3 * med['first_window']:.1f} ms (medians of {args.latency_rounds} interleaved "
          f"runs after one warm-up), {windows:.2f} windows/question, latency ratio "
          f"{ratio:.2f}, ratio / windows {ratio / windows:.2f}; load average {_load()}")


def _load():
  return " ".join(f"{v:.2f}" for v in os.getloadavg())


if __name__ == "__main__":
  main()
