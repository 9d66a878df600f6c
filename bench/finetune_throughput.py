"""Fine-tuning throughput on real, variable-length GLUE data, end to end from the TSV.

Ours: the trainer's loop over the sentence_prediction task's reader (in-graph WordPiece,
dynamic padding, tf.data). Peers: Model Garden (its BertTokenizer/BertPackInputs layers,
every example padded to seq_length) and Hugging Face (BertTokenizerFast per batch,
padding to the batch's longest). Same vocab, batch, maximum length and model size; every
step reads, tokenizes and pads its own next batch. Workers alternate round by round;
examples/s is total examples over total time of the timed steps (steps differ in length
under dynamic padding, so a mean, not a median of steps, is the rate).

  python bench/finetune_throughput.py --data_dir=$BERT_TF_DATA --tasks=sst2,mrpc
"""

import os
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
common.define_data_dir_flag()
flags.DEFINE_string("vocab_file", "", "WordPiece vocab; default DATA_DIR/bert_vocab/uncased/"
                    "vocab.txt.")
flags.DEFINE_list("tasks", ["sst2", "mrpc"], "GLUE tasks: sst2, mrpc.")
flags.DEFINE_list("peers", ["model_garden", "hf"], "Peers to compare against.")
flags.DEFINE_string("size", "mini", "Encoder size (tiny, mini, small, base, ...).")
flags.DEFINE_integer("batch_size", 32, "Examples per step.")
flags.DEFINE_integer("seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("rounds", 3, "Interleaved rounds.")
flags.DEFINE_integer("steps_per_round", 5, "Timed steps per system per round.")
flags.DEFINE_bool("jit_compile", False, "XLA-compile our forward/backward.")
flags.DEFINE_list("ours_variants", [], "Also run these variants of ours side by side "
                  "(levers): buckets, max_length, packed, full_last_layer, xla, buckets_xla.")
flags.DEFINE_bool("install_peers", False, "Create the peers' virtual environments first.")
flags.DEFINE_string("venv_root", common.DEFAULT_VENV_ROOT, "Where the peers' venvs live.")
flags.DEFINE_string("device", "cpu", "cpu or gpu.")
flags.DEFINE_bool("write_readme", True, "Update the fine-tuning section of bench/README.md.")

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
PEER_SCRIPTS = {"model_garden": "bench/peers/model_garden_finetune.py",
                "hf": "bench/peers/hf_finetune.py"}


def main(argv):
  del argv
  peers = common.ready_peers(FLAGS.peers, FLAGS.install_peers, FLAGS.venv_root)
  vocab = FLAGS.vocab_file or common.data_path("bert_vocab", "uncased", "vocab.txt")
  env = {"CUDA_VISIBLE_DEVICES": ""} if FLAGS.device == "cpu" else {}
  command = common.command_line()
  rows, payload = [], {"command": command, "machine": common.machine_description(),
                       "tasks": {}}
  for task in FLAGS.tasks:
    if task not in TSV:
      raise app.UsageError(f"Unknown task '{task}'; tasks: {', '.join(TSV)}")
    tsv = common.data_path(TSV[task])
    if not os.path.exists(tsv):
      raise app.UsageError(f"{tsv} does not exist (check --data_dir)")
    args = ["--size", FLAGS.size, "--task", task, "--train_tsv", tsv, "--vocab_file", vocab,
            "--batch_size", str(FLAGS.batch_size), "--seq_length", str(FLAGS.seq_length)]
    specs = [(f"ours_{task}", [sys.executable, "bench/ours_finetune_worker.py", *args,
                               "--jit_compile", str(int(FLAGS.jit_compile))], env)]
    for variant in FLAGS.ours_variants:
      if variant not in OURS_VARIANTS:
        raise app.UsageError(f"Unknown variant '{variant}'; variants: "
                             f"{', '.join(OURS_VARIANTS)}")
      specs.append((f"ours-{variant}_{task}",
                    [sys.executable, "bench/ours_finetune_worker.py", *args,
                     "--jit_compile", str(int(FLAGS.jit_compile)),
                     *OURS_VARIANTS[variant][1]], env))
    specs += [(f"{p}_{task}", [common.peer_python(p, FLAGS.venv_root), PEER_SCRIPTS[p],
                               *args], {**env, **common.peer_env()}) for p in peers]
    print(f"{task}: {FLAGS.size}, batch {FLAGS.batch_size}, max length {FLAGS.seq_length}",
          flush=True)
    workers = common.start_sequential(specs)
    common.alternate(workers, FLAGS.rounds, FLAGS.steps_per_round)
    results = {}
    for worker, (_, _, _) in zip(workers, specs):
      seconds = sum(worker.step_seconds)
      results[worker.name.rsplit("_", 1)[0]] = {
          "examples_per_second": FLAGS.batch_size * len(worker.step_seconds) / seconds,
          "peak_rss_mb": worker.peak_rss_mb, "info": worker.info}
    payload["tasks"][task] = results
    ours = results["ours"]["examples_per_second"]
    for system, r in results.items():
      ratio = "" if system == "ours" else f"{ours / r['examples_per_second']:.2f}x"
      label = (OURS_VARIANTS[system[5:]][0] if system.startswith("ours-")
               else common.PEER_LABELS[system])
      rows.append([task, FLAGS.size, label,
                   f"{r['examples_per_second']:.1f}",
                   f"{r['peak_rss_mb']:.0f}" if r["peak_rss_mb"] else "n/a", ratio])
    for peer, target in (("model_garden", 3.0), ("hf", 1.2)):
      if peer in results and task == "sst2":
        ratio = ours / results[peer]["examples_per_second"]
        print(f"{task}: ours/{peer} = {ratio:.2f}x (target {target}x: "
              f"{'met' if ratio >= target else 'NOT met'})")
  table = common.markdown_table(["task", "size", "system", "examples/s", "peak RSS MiB",
                                 "ours/this"], rows)
  print(table)
  common.write_results("finetune_throughput", payload)
  if FLAGS.write_readme:
    common.update_readme_section(
        "finetune", f"Command: `{command}` ({FLAGS.rounds} interleaved rounds x "
        f"{FLAGS.steps_per_round} steps, batch {FLAGS.batch_size})\n\n{table}")
  print(f"finetune_throughput: {len(FLAGS.tasks)} tasks; command: {command}")


if __name__ == "__main__":
  app.run(main)
