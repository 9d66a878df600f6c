"""Fine-tuning throughput on real, variable-length GLUE data, end to end from the TSV.

Ours: the trainer's loop over the sentence_prediction task's reader (in-graph WordPiece,
dynamic padding, tf.data). Peers: Model Garden (its BertTokenizer/BertPackInputs layers,
every example padded to seq_length) and Hugging Face (BertTokenizerFast per batch,
padding to the batch's longest). Same vocab, batch, maximum length and model size; every
step reads, tokenizes and pads its own next batch. Workers take turns round by round
(the protocol of bench/common.py: a quiet gate before each round, the starting system
rotating, --compete for a competing one-core job); examples/s is the batch over the
median step, and ours/this the ratio of median steps with a 95% bootstrap interval over
rounds. Under dynamic padding steps differ in length: every system reads the same TSV
in its own shuffled order, so a median over many steps compares like with like.

  python -m bench.finetune_throughput --data_dir=$BERT_TF_DATA --tasks=sst2,mrpc
"""

import json
import os
import sys

from absl import app
from absl import flags

from bench import common
from bench import driver
from bench import peer_envs
from bench import stats

FLAGS = flags.FLAGS
common.define_data_dir_flag()
flags.DEFINE_string("vocab_file", "", "WordPiece vocab; default DATA_DIR/bert_vocab/uncased/"
                    "vocab.txt.")
flags.DEFINE_list("tasks", ["sst2", "mrpc"], "GLUE tasks: sst2, mrpc.")
flags.DEFINE_list("peers", ["model_garden", "hf"], "Peers to compare against.")
flags.DEFINE_string("size", "mini", "Encoder size (tiny, mini, small, base, ...).")
flags.DEFINE_integer("batch_size", 32, "Examples per step.")
flags.DEFINE_integer("seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("rounds", 5, "Interleaved rounds (at least 5 for figures of "
                     "record).")
flags.DEFINE_integer("steps_per_round", 5, "Timed steps per system per round.")
flags.DEFINE_bool("jit_compile", False, "XLA-compile our forward/backward.")
flags.DEFINE_list("ours_variants", [], "Also run these variants of ours side by side "
                  "(levers): buckets, max_length, packed, full_last_layer, xla, buckets_xla.")
flags.DEFINE_bool("install_peers", False, "Create the peers' virtual environments first.")
flags.DEFINE_string("venv_root", peer_envs.DEFAULT_VENV_ROOT, "Where the peers' venvs live.")
flags.DEFINE_string("device", "cpu", "cpu or gpu.")
flags.DEFINE_bool("write_readme", True, "Record the run: bench/results/"
                  "finetune_throughput.json and the fine-tuning section of bench/README.md "
                  "(without it, the results go to the workers' log folder).")
driver.define_protocol_flags()

TSV = {"sst2": "glue_sst2/train.tsv", "mrpc": "glue_mrpc/train.tsv"}
# name: (label, extra flags of bench/ours_finetune_worker.py)
OURS_VARIANTS = {
    "buckets": ("bert_tf, length buckets", ["--batching", "buckets"]),
    "max_length": ("bert_tf, padded to seq_length", ["--batching", "max_length"]),
    "packed": ("bert_tf, examples packed into rows of seq_length",
               ["--batching", "packed"]),
    "full_last_layer": ("bert_tf, last block at every position",
                        ["--sparse_last_layer", "0"]),
    "xla": ("bert_tf, jit_compile=True", ["--jit_compile", "1"]),
    "buckets_xla": ("bert_tf, length buckets, jit_compile=True",
                    ["--batching", "buckets", "--jit_compile", "1"]),
}
PEER_MODULES = {"model_garden": "bench.peers.model_garden_finetune",
                "hf": "bench.peers.hf_finetune"}


def main(argv):
  del argv
  driver.check_rounds_of_record(FLAGS.rounds, FLAGS.write_readme)
  peers = peer_envs.ready_peers(FLAGS.peers, FLAGS.install_peers, FLAGS.venv_root)
  vocab = FLAGS.vocab_file or common.data_path("bert_vocab", "uncased", "vocab.txt")
  env = {"CUDA_VISIBLE_DEVICES": ""} if FLAGS.device == "cpu" else {}
  command = common.command_line()
  rows, payload = [], {"command": command, "machine": common.machine_description(),
                       "compete": FLAGS.compete, "tasks": {}, "loads": {}}
  for task in FLAGS.tasks:
    if task not in TSV:
      raise app.UsageError(f"Unknown task '{task}'; tasks: {', '.join(TSV)}")
    tsv = common.data_path(TSV[task])
    if not os.path.exists(tsv):
      raise app.UsageError(f"{tsv} does not exist (check --data_dir)")
    args = ["--size", FLAGS.size, "--task", task, "--train_tsv", tsv, "--vocab_file", vocab,
            "--batch_size", str(FLAGS.batch_size), "--seq_length", str(FLAGS.seq_length)]
    specs = [(f"ours_{task}", [sys.executable, "-m", "bench.ours_finetune_worker", *args,
                               "--jit_compile", str(int(FLAGS.jit_compile))], env)]
    for variant in FLAGS.ours_variants:
      if variant not in OURS_VARIANTS:
        raise app.UsageError(f"Unknown variant '{variant}'; variants: "
                             f"{', '.join(OURS_VARIANTS)}")
      specs.append((f"ours-{variant}_{task}",
                    [sys.executable, "-m", "bench.ours_finetune_worker", *args,
                     "--jit_compile", str(int(FLAGS.jit_compile)),
                     *OURS_VARIANTS[variant][1]], env))
    specs += [(f"{p}_{task}",
               [peer_envs.peer_python(p, FLAGS.venv_root), "-m", PEER_MODULES[p], *args],
               {**env, **peer_envs.peer_env()}) for p in peers]
    print(f"{task}: {FLAGS.size}, batch {FLAGS.batch_size}, max length {FLAGS.seq_length}",
          flush=True)
    workers = driver.start_sequential(specs)
    records = driver.alternate(workers, FLAGS.rounds, FLAGS.steps_per_round,
                               FLAGS.quiet_load, FLAGS.quiet_timeout, FLAGS.compete)
    payload["loads"][task] = {"summary": stats.load_summary(records), "rounds": records}
    results = {}
    for worker in workers:
      summary = stats.step_summary(worker.rounds)
      results[worker.name.rsplit("_", 1)[0]] = {
          "examples_per_second": FLAGS.batch_size / summary["median_step_seconds"],
          **summary, "peak_rss_mb": worker.peak_rss_mb, "info": worker.info,
          **({} if worker is workers[0] else
             {"ours_over_this": stats.ratio_with_interval(workers[0].rounds,
                                                          worker.rounds)})}
    payload["tasks"][task] = results
    for system, r in results.items():
      ratio = r.get("ours_over_this")
      label = (OURS_VARIANTS[system[5:]][0] if system.startswith("ours-")
               else peer_envs.PEER_LABELS[system])
      rows.append([task, FLAGS.size, label,
                   f"{1000 * r['median_step_seconds']:.0f} "
                   f"[{1000 * r['step_seconds_q1']:.0f}-{1000 * r['step_seconds_q3']:.0f}]",
                   f"{r['examples_per_second']:.1f}",
                   f"{r['peak_rss_mb']:.0f}" if r["peak_rss_mb"] else "n/a",
                   stats.format_interval(ratio["ratio"], ratio["interval"]) if ratio else ""])
    for peer, target in (("model_garden", 3.0), ("hf", 1.2)):
      if peer in results and task == "sst2":
        ratio = results[peer]["ours_over_this"]
        print(f"{task}: ours/{peer} = "
              f"{stats.format_interval(ratio['ratio'], ratio['interval'])} (target "
              f"{target}x: {'met' if ratio['interval'][0] >= target else 'NOT met'} at the "
              f"interval's low end)")
  table = common.markdown_table(["task", "size", "system", "median step ms [IQR]",
                                 "examples/s", "peak RSS MiB", "ours/this [95% CI]"], rows)
  print(table)
  loads = "; ".join(f"{task}: {v['summary']}" for task, v in payload["loads"].items())
  print(loads)
  if FLAGS.write_readme:
    common.write_results("finetune_throughput", payload)
    common.update_readme_section(
        "finetune", f"Command: `{command}` ({FLAGS.rounds} rounds x "
        f"{FLAGS.steps_per_round} steps, batch {FLAGS.batch_size}; "
        f"{payload['machine']}; {loads})\n\n{table}")
  else:
    path = os.path.join(common.LOG_DIR, "finetune_throughput.json")
    with open(path, "w") as f:
      json.dump(payload, f, indent=1, sort_keys=True)
    print(f"results: {path}")
  print(f"finetune_throughput: {len(FLAGS.tasks)} tasks; command: {command}")


if __name__ == "__main__":
  app.run(main)
