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

Length buckets (train_data.length_buckets) order each shuffle window's rows from short
to long, so a few consecutive steps are not a sample of the data: --whole_windows makes
every round time one whole window of each bucketed system (after a window of warm-up,
which also compiles each bucket's JAX step) and --steps_per_round steps, a random
sample of batches, of the others, and takes each round's mean step (the time per
example, which the median of a skewed mix of lengths is not); ratios are then of those
means, with the bootstrap over rounds. The grouping against none on both engines:

  python -m bench.finetune_throughput --data_dir=$BERT_TF_DATA --tasks=sst2,mrpc
  python -m bench.finetune_throughput --data_dir=$BERT_TF_DATA --tasks=sst2 --peers= \
      --ours_variants=buckets,jax,jax_buckets --whole_windows --nowrite_readme
"""

import math
import os
import sys

from absl import app
from absl import flags

from bench import common
from bench import driver
from bench import peer_envs
from bench import stats
from bert_tf import configs

FLAGS = flags.FLAGS
common.define_data_dir_flag()
flags.DEFINE_string("vocab_file", "", "WordPiece vocab; default DATA_DIR/bert_vocab/uncased/"
                    "vocab.txt.")
flags.DEFINE_list("tasks", ["sst2", "mrpc"], "GLUE tasks: sst2, mrpc.")
flags.DEFINE_list("peers", ["model_garden", "hf"], "Peers to compare against.")
common.define_shape_flags(size="mini", batch_help="Examples per step.")
flags.DEFINE_integer("rounds", 5, "Interleaved rounds (at least 5 for figures of "
                     "record).")
flags.DEFINE_integer("steps_per_round", 5, "Timed steps per system per round.")
flags.DEFINE_bool("whole_windows", False, "Each round times one whole shuffle window "
                  "(SHUFFLE_WINDOW rows) of each length-bucket variant, after a window "
                  "of warm-up, and --steps_per_round steps of the others; a system's "
                  "figure is its mean step per round.")
flags.DEFINE_bool("jit_compile", False, "XLA-compile our forward/backward.")
flags.DEFINE_list("ours_variants", [], "Also run these variants of ours side by side "
                  "(levers): buckets, max_length, packed, full_last_layer, xla, buckets_xla, "
                  "jax, jax_buckets.")
flags.DEFINE_bool("install_peers", False, "Create the peers' virtual environments first.")
flags.DEFINE_string("venv_root", peer_envs.DEFAULT_VENV_ROOT, "Where the peers' venvs live.")
flags.DEFINE_string("device", "cpu", "cpu or gpu.")
flags.DEFINE_bool("write_readme", True, "Record the run: bench/results/"
                  "finetune_throughput.json and the fine-tuning section of bench/README.md "
                  "(without it, the results go to the run's own folder).")
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
    "jax": ("bert_tf, JAX engine (padded to seq_length)", ["--backend", "jax"]),
    "jax_buckets": ("bert_tf, JAX engine, length buckets",
                    ["--backend", "jax", "--batching", "buckets"]),
}
# The rows shuffled together (train_data.shuffle_buffer_size's default, which the worker
# trains with): the window that length buckets order by length.
SHUFFLE_WINDOW = configs.DataConfig().shuffle_buffer_size
PEER_MODULES = {"model_garden": "bench.peers.model_garden_finetune",
                "hf": "bench.peers.hf_finetune"}


def _round_figures(rounds):
  """Per-round lists of seconds as the figures use them: each step, or under
  --whole_windows each round's mean step (one value per round)."""
  if not FLAGS.whole_windows:
    return rounds
  return [[sum(r) / len(r)] for r in rounds if r]


def _bucket_pairs(systems):
  """(bucketed, unbucketed) system names of `systems` that differ only in length
  buckets: ours-buckets and ours, ours-jax_buckets and ours-jax, ..."""
  pairs = []
  for system in systems:
    parts = system.split("-", 1)
    if len(parts) < 2 or "buckets" not in parts[1].split("_"):
      continue
    rest = "_".join(p for p in parts[1].split("_") if p != "buckets")
    plain = f"ours-{rest}" if rest else "ours"
    if plain in systems:
      pairs.append((system, plain))
  return pairs


def main(argv):
  del argv
  driver.check_rounds_of_record(FLAGS.rounds, FLAGS.write_readme)
  peers = peer_envs.ready_peers(FLAGS.peers, FLAGS.install_peers, FLAGS.venv_root)
  vocab = FLAGS.vocab_file or common.data_path("bert_vocab", "uncased", "vocab.txt")
  env = {"CUDA_VISIBLE_DEVICES": ""} if FLAGS.device == "cpu" else {}
  command = common.command_line()
  window_steps = math.ceil(SHUFFLE_WINDOW / FLAGS.batch_size)
  rows, payload = [], {"command": command, "machine": common.machine_description(),
                       "compete": FLAGS.compete, "whole_windows": FLAGS.whole_windows,
                       "tasks": {}, "loads": {}}
  for task in FLAGS.tasks:
    if task not in TSV:
      raise app.UsageError(f"Unknown task '{task}'; tasks: {', '.join(TSV)}")
    tsv = common.data_path(TSV[task])
    if not os.path.exists(tsv):
      raise app.UsageError(f"{tsv} does not exist (check --data_dir)")
    args = ["--size", FLAGS.size, "--task", task, "--train_tsv", tsv, "--vocab_file", vocab,
            "--batch_size", str(FLAGS.batch_size), "--seq_length", str(FLAGS.seq_length)]
    ours = [sys.executable, "-m", "bench.ours_finetune_worker", *args,
            "--jit_compile", str(int(FLAGS.jit_compile))]
    specs = [(f"ours_{task}", ours, env)]
    for variant in FLAGS.ours_variants:
      if variant not in OURS_VARIANTS:
        raise app.UsageError(f"Unknown variant '{variant}'; variants: "
                             f"{', '.join(OURS_VARIANTS)}")
      extra = OURS_VARIANTS[variant][1]
      if FLAGS.whole_windows and "buckets" in extra:
        extra = [*extra, "--warmup_steps", str(window_steps)]
      specs.append((f"ours-{variant}_{task}", [*ours, *extra], env))
    specs += [(f"{p}_{task}",
               [peer_envs.peer_python(p, FLAGS.venv_root), "-m", PEER_MODULES[p], *args],
               {**env, **peer_envs.peer_env()}) for p in peers]
    steps_per_round = [window_steps if FLAGS.whole_windows and "buckets" in argv
                       else FLAGS.steps_per_round for _, argv, _ in specs]
    print(f"{task}: {FLAGS.size}, batch {FLAGS.batch_size}, max length {FLAGS.seq_length}",
          flush=True)
    workers = driver.start_sequential(specs)
    records = driver.alternate(workers, FLAGS.rounds, steps_per_round,
                               FLAGS.quiet_load, FLAGS.quiet_timeout, FLAGS.compete)
    payload["loads"][task] = {"summary": stats.load_summary(records), "rounds": records}
    results, figures = {}, {}
    for worker in workers:
      system = worker.name.rsplit("_", 1)[0]
      figures[system] = _round_figures(worker.rounds)
      summary = stats.step_summary(figures[system])
      results[system] = {
          "examples_per_second": FLAGS.batch_size / summary["median_step_seconds"],
          "cpu_seconds_per_step": stats.median(
              [s for r in _round_figures(worker.cpu_rounds) for s in r]),
          **summary, "peak_rss_mb": worker.peak_rss_mb, "info": worker.info,
          **({} if worker is workers[0] else
             {"ours_over_this": stats.ratio_with_interval(figures["ours"],
                                                          figures[system])})}
    payload["tasks"][task] = results
    for system, r in results.items():
      ratio = r.get("ours_over_this")
      label = (OURS_VARIANTS[system[5:]][0] if system.startswith("ours-")
               else peer_envs.PEER_LABELS[system])
      rows.append([task, FLAGS.size, label,
                   f"{1000 * r['median_step_seconds']:.0f} "
                   f"[{1000 * r['step_seconds_q1']:.0f}-{1000 * r['step_seconds_q3']:.0f}]",
                   f"{r['examples_per_second']:.1f}", f"{r['cpu_seconds_per_step']:.3f}",
                   f"{r['peak_rss_mb']:.0f}" if r["peak_rss_mb"] else "n/a",
                   stats.format_interval(ratio["ratio"], ratio["interval"]) if ratio else ""])
    for bucketed, plain in _bucket_pairs(figures):
      speedup = stats.ratio_with_interval(figures[bucketed], figures[plain])
      payload.setdefault("bucket_speedups", {}).setdefault(task, {})[bucketed] = {
          "over": plain, **speedup}
      print(f"{task}: {bucketed} over {plain} = "
            f"{stats.format_interval(speedup['ratio'], speedup['interval'])}")
    for peer, target in (("model_garden", 3.0), ("hf", 1.2)):
      if peer in results and task == "sst2":
        ratio = results[peer]["ours_over_this"]
        print(f"{task}: ours/{peer} = "
              f"{stats.format_interval(ratio['ratio'], ratio['interval'])} (target "
              f"{target}x: {'met' if ratio['interval'][0] >= target else 'NOT met'} at the "
              f"interval's low end)")
  step = ("mean step ms per window, median over rounds [IQR]" if FLAGS.whole_windows
          else "median step ms [IQR]")
  table = common.markdown_table(["task", "size", "system", step, "examples/s",
                                 "CPU s/step", "peak RSS MiB", "ours/this [95% CI]"], rows)
  print(table)
  loads = "; ".join(f"{task}: {v['summary']}" for task, v in payload["loads"].items())
  print(loads)
  print(f"results: {common.write_results('finetune_throughput', payload)}")
  if FLAGS.write_readme:
    common.update_readme_section(
        "finetune", f"Command: `{command}` ({FLAGS.rounds} rounds x "
        f"{FLAGS.steps_per_round} steps, batch {FLAGS.batch_size}; "
        f"{payload['machine']}; {loads})\n\n{table}")
  print(f"finetune_throughput: {len(FLAGS.tasks)} tasks; command: {command}")


if __name__ == "__main__":
  app.run(main)
