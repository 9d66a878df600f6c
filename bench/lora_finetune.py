r"""LoRA against full fine-tuning from one checkpoint, at the same step budget.

  python -m bench.lora_finetune --tasks=sst2,mrpc --data_dir=$BERT_TF_DATA \
    --config_file=runs/minilm/config.yaml --init_checkpoint=$PWD/runs/minilm \
    --vocab_file=runs/minilm/vocab.txt --output_dir=runs/lora_bench \
    --train_steps=300 --batch_size=32 --seq_length=64 --learning_rate=1e-4 \
    --lora_rank=8 --lora_learning_rate=1e-3

For each GLUE task (bench/accuracy.py's flags, data and experiment: the same warm start,
budget and schedule) it trains twice, each in its own process so that its peak memory is
its own: `full` (every weight trains) and `lora` (model.lora_rank=--lora_rank on
model.lora_targets, encoder frozen; bert_tf/models/lora.py), and reports the trainable
parameters, the peak resident memory (RSS) of the process, training examples/s (the
trainer's rate over the last summary window, tracing excluded) and the dev score. Runs
follow each other (training runs cannot interleave), their order alternating task by
task, with the load average of each. Each (task, method) entry of
bench/results/lora_finetune.json is replaced.
"""

import json
import math
import os
import resource
import subprocess
import sys
import time

from absl import app
from absl import flags

from bench import accuracy
from bench import common

FLAGS = flags.FLAGS
flags.DEFINE_list("methods", ["full", "lora"], "full, lora.")
flags.DEFINE_integer("lora_rank", 8, "The adapters' rank (model.lora_rank).")
flags.DEFINE_float("lora_learning_rate", 1e-3, "Peak learning rate of the LoRA runs "
                   "(--learning_rate is the full fine-tuning's).")
flags.DEFINE_string("worker", None, "Internal: TASK:METHOD, run one training in this process.")

RESULT_TAG = "LORA_RESULT"


def _worker(task: str, method: str) -> None:
  """Trains and evaluates one (task, method); prints its figures as one JSON line."""
  from bert_tf.training import params_file  # pylint: disable=g-import-not-at-top
  from bert_tf.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
  overrides = [FLAGS.params_override] if FLAGS.params_override else []
  if method == "lora":
    overrides.append(f"model.lora_rank={FLAGS.lora_rank}")
    FLAGS.learning_rate = FLAGS.lora_learning_rate
  FLAGS.params_override = ",".join(overrides) or None
  experiment = accuracy._resolve(  # pylint: disable=protected-access
      f"glue_{task}", common.data_path(f"glue_{task}", "train.tsv"),
      common.data_path(f"glue_{task}", "dev.tsv"), FLAGS.train_steps)
  model_dir = os.path.join(FLAGS.output_dir, f"{task}_{method}")
  trainer = trainer_lib.Trainer(experiment, model_dir, log_fn=lambda line: print(line, flush=True))
  start = time.time()
  report = trainer.train()
  train_seconds = time.time() - start
  # The run's config beside its checkpoints, so that the run can be exported.
  experiment.save(os.path.join(model_dir, params_file.PARAMS_FILE))
  metrics = trainer.evaluate()
  trainable = sum(math.prod(v.shape) for v in trainer.model.trainable_variables)
  total = sum(math.prod(v.shape) for v in trainer.model.variables
              if "float" in str(v.dtype))
  print(RESULT_TAG + " " + json.dumps({
      "trainable_parameters": trainable, "parameters": total,
      "examples_per_second": report.get("sequences_per_second"),
      "train_seconds": train_seconds, "learning_rate": FLAGS.learning_rate,
      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
      "metrics": {k: v for k, v in metrics.items() if k != "loss"}}), flush=True)


def _run(task: str, method: str) -> dict:
  """One worker process; returns its figures with the load average around it."""
  argv = [sys.executable, "-m", "bench.lora_finetune"] + [
      a for a in sys.argv[1:] if not a.startswith("--worker")] + [f"--worker={task}:{method}"]
  before = common.load_average()
  print(f"[{task} {method}] load {before}", flush=True)
  output = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=True,
                          cwd=common.REPO_ROOT).stdout
  lines = [line for line in output.splitlines() if line.startswith(RESULT_TAG + " ")]
  if not lines:
    raise RuntimeError(f"{task} {method}: no result line in\n{output}")
  result = json.loads(lines[-1][len(RESULT_TAG) + 1:])
  result["load_average"] = f"{before} → {common.load_average()}"
  return result


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  common.require_flags("vocab_file", "output_dir", "init_checkpoint")
  unknown = set(FLAGS.tasks) - set(accuracy.GLUE)
  if unknown:
    raise app.UsageError(f"Not GLUE tasks: {', '.join(sorted(unknown))}")
  if FLAGS.worker:
    _worker(*FLAGS.worker.split(":"))
    return
  entries = {}
  for i, task in enumerate(FLAGS.tasks):
    for method in (FLAGS.methods if i % 2 == 0 else FLAGS.methods[::-1]):
      result = _run(task, method)
      result.update(command=common.command_line(), machine=common.machine_description(),
                    budget=(f"{FLAGS.train_steps} steps, batch {FLAGS.batch_size}, seq "
                            f"{FLAGS.seq_length}, lr {result['learning_rate']:g}"),
                    date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
      print(f"[{task} {method}] " + json.dumps(result), flush=True)
      entries[f"{task}/{method}"] = result
      common.merge_results("lora_finetune", "runs", {f"{task}/{method}": result})
  for key, r in entries.items():
    print(f"{key}: trainable {r['trainable_parameters']:,} of {r['parameters']:,}, peak RSS "
          f"{r['peak_rss_mb']:.0f} MB, {r['examples_per_second']:.1f} examples/s, dev "
          + ", ".join(f"{k} {100 * v:.1f}" for k, v in r["metrics"].items()))


if __name__ == "__main__":
  app.run(main)
