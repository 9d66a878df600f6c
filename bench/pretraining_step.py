"""Pretraining-step throughput of bert_tf against Model Garden, KerasHub and Hugging Face.

A full step each: masked LM on `predictions` gathered positions + next-sentence
prediction, backward, AdamW (weight decay 0.01 except LayerNorm and biases, global-norm
clipping at 1.0), on one batch of random ids held in memory, identical for every system.
Ours is the trainer's own loop (bert_tf.training.trainer.Trainer.train_loop_function).
Every system runs in its own process (each peer in its own virtual environment, see
--install_peers); the processes take turns, round after round, and the table reports
each one's median sequences/s and the ratio ours/peer within the same run.

--variants adds our worker with one speed lever switched away from its default as one
more system each (an A/B of the lever in the same run; VARIANTS below); --baseline adds
the worker of another checkout (an A/B of a change). Each configuration's figures go to
its entry of bench/results/pretraining_step.json (the other entries are kept), or with
--nowrite_readme (an A/B check) to the workers' log folder.

  python bench/pretraining_step.py --configs=mini,small,base --install_peers
  python bench/pretraining_step.py --configs=base512 --pairwise --rounds=2
  python bench/pretraining_step.py --configs=mini --peers= --variants=xla,full_last_layer
  python bench/pretraining_step.py --configs=base --peers= --baseline=/tmp/before
"""

import json
import os
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_list("configs", ["mini", "small", "base"],
                  f"Configurations to run, among: mini, small, base, base512.")
flags.DEFINE_list("peers", ["model_garden", "keras_hub", "hf"],
                  "Peers to compare against (empty for ours alone).")
flags.DEFINE_integer("rounds", 5, "Interleaved rounds.")
flags.DEFINE_integer("steps_per_round", 0, "Timed steps per system per round "
                     "(0: a default per configuration).")
flags.DEFINE_integer("steps_per_loop", 1, "Steps per call of our trainer's loop.")
flags.DEFINE_bool("jit_compile", False, "XLA-compile our forward/backward "
                  "(runtime.jit_compile).")
flags.DEFINE_list("variants", [], "Our step with one lever switched, each as one more "
                  "system: any of the names of VARIANTS in this file.")
flags.DEFINE_bool("peer_onednn", False, "Run the TensorFlow peers with oneDNN forced on "
                  "(TF_ENABLE_ONEDNN_OPTS=1, as bert_tf sets it for ours) instead of "
                  "TensorFlow's own default, which leaves it off on CPUs without AVX-512 "
                  "VNNI/BF16 or AMX.")
flags.DEFINE_string("baseline", "", "Path of another checkout of bert_tf (for example a "
                    "`git worktree` of the commit before a change): its own worker runs as "
                    "one more system, 'baseline', interleaved with ours, so that a change's "
                    "effect on speed is an A/B within one run.")
flags.DEFINE_bool("install_peers", False, "Create the peers' virtual environments first.")
flags.DEFINE_string("venv_root", common.DEFAULT_VENV_ROOT, "Where the peers' venvs live.")
flags.DEFINE_string("device", "cpu", "cpu or gpu. On gpu, the workers see the GPU; on "
                    "cpu, CUDA_VISIBLE_DEVICES is emptied for every worker.")
flags.DEFINE_bool("pairwise", False, "Keep only two systems alive at a time: ours beside "
                  "each peer in turn (a fresh worker of ours per pair), for shapes where "
                  "all systems at once do not fit in memory (base512 needs about 6.5 GB "
                  "each). Each ratio then comes from its own pair.")
flags.DEFINE_bool("report_only", False, "Time nothing: rebuild the README section from "
                  "bench/results/pretraining_step.json (for example after a new matmul "
                  "peak measurement changed the MFU column).")
flags.DEFINE_bool("write_readme", True, "Record the run: its configurations' entries in "
                  "bench/results/pretraining_step.json and the README section (without "
                  "it, the results go to the workers' log folder).")

RESULTS = "pretraining_step"

# name: (size, batch, seq_length, predictions, default timed steps per round)
CONFIGS = {
    "mini": ("mini", 32, 128, 20, 4),
    "small": ("small", 32, 128, 20, 3),
    "base": ("base", 8, 128, 20, 3),
    "base512": ("base", 4, 512, 76, 2),
}
# Levers of our step (the default is the fastest measured; docs/performance.md has their
# history). name: (what it changes, worker flags, worker environment).
VARIANTS = {
    "xla": ("forward/backward XLA-compiled (runtime.jit_compile=true)",
            ["--jit_compile", "1"], {}),
    "unfused_optimizer": ("AdamW as separate TensorFlow kernels, not one XLA function "
                          "per variable", ["--fused_optimizer", "0"], {}),
    "full_last_layer": ("last block over all positions, not only [CLS] and the masked "
                        "ones", ["--sparse_last_layer", "0"], {}),
    "no_xla_fusion": ("the element-wise pieces of bert_tf.layers.fusion as plain "
                      "TensorFlow ops", ["--xla_fusion", "0"], {}),
    "plain_layers": ("runtime.fused_kernels=false: the plain Keras layers",
                     ["--fused_kernels", "0"], {}),
    "keras_dense": ("Keras's Dense call instead of bert_tf.layers.Dense's",
                    ["--keras_dense", "1"], {}),
    "keras_dropout": ("Keras's float32 uniform dropout mask instead of 16 Philox bits",
                      ["--keras_dropout", "1"], {}),
    "steps_per_loop_10": ("10 steps per tf.function call", ["--steps_per_loop", "10"], {}),
    "inter_op_1": ("1 inter-op thread", ["--inter_op_threads", "1"], {}),
    "intra_op_1": ("1 intra-op thread", ["--intra_op_threads", "1"], {}),
    "intra_op_4": ("4 intra-op threads", ["--intra_op_threads", "4"], {}),
    "mirrored_2cpu": ("MirroredStrategy over 2 logical CPU devices of 1 thread each",
                      ["--num_cpu_devices", "2", "--intra_op_threads", "1"], {}),
    "autojit_fusible": ("XLA auto-clustering of the element-wise ops only",
                        [], {"TF_XLA_FLAGS": "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit "
                                             "--tf_xla_ops_to_cluster=FUSIBLE"}),
    "no_onednn": ("oneDNN kernels off (Eigen's)", [], {"TF_ENABLE_ONEDNN_OPTS": "0"}),
    "bfloat16": ("mixed_bfloat16 (the peers run float32)",
                 ["--mixed_precision", "mixed_bfloat16"], {}),
}
# Systems of ours: never the "best peer" of a ratio.
OURS = ("ours", "baseline", *(f"ours_{v}" for v in VARIANTS))
PEER_SCRIPTS = {
    "model_garden": "bench/peers/model_garden_pretraining.py",
    "keras_hub": "bench/peers/keras_hub_pretraining.py",
    "hf": "bench/peers/hf_pretraining.py",
}


def model_flops_per_sequence(size, seq_length, predictions, vocab_size=30522):
  """Training FLOPs of one sequence (3x the forward matmul FLOPs; the embedding
  lookups, LayerNorms and softmaxes are not counted)."""
  sys.path.insert(0, os.path.join(common.BENCH_DIR, "peers"))
  import protocol  # pylint: disable=g-import-not-at-top
  layers, hidden, _, intermediate = protocol.size_args(size)
  per_token_layer = 2 * (4 * hidden * hidden + 2 * hidden * intermediate)
  attention = 2 * 2 * seq_length * hidden  # scores and context, per token per layer
  encoder = seq_length * layers * (per_token_layer + attention)
  mlm = predictions * 2 * (hidden * hidden + hidden * vocab_size)
  pooler = 2 * hidden * hidden
  return 3 * (encoder + mlm + pooler)


def worker_env():
  env = {}
  if FLAGS.device == "cpu":
    env["CUDA_VISIBLE_DEVICES"] = ""
  return env


def run_config(name, peers):
  size, batch, seq, predictions, default_steps = CONFIGS[name]
  steps = FLAGS.steps_per_round or default_steps
  shape = ["--size", size, "--batch_size", str(batch), "--seq_length", str(seq),
           "--predictions", str(predictions)]
  ours = [sys.executable, "bench/ours_pretraining_worker.py", *shape,
          "--steps_per_loop", str(FLAGS.steps_per_loop),
          "--jit_compile", str(int(FLAGS.jit_compile))]
  specs = [("ours", ours, worker_env())]
  for variant in FLAGS.variants:
    _, extra, env = VARIANTS[variant]
    specs.append((f"ours_{variant}", ours + extra, {**worker_env(), **env}))
  if FLAGS.baseline:
    baseline = os.path.abspath(FLAGS.baseline)
    specs.append(("baseline", [sys.executable,
                               os.path.join(baseline, "bench", "ours_pretraining_worker.py"),
                               *shape, "--steps_per_loop", str(FLAGS.steps_per_loop),
                               "--jit_compile", str(int(FLAGS.jit_compile))],
                  {**worker_env(), "PYTHONPATH": os.pathsep.join(
                      [os.path.join(baseline, "bench", "peers"), baseline])}))
  for peer in peers:
    specs.append((peer, [common.peer_python(peer, FLAGS.venv_root), PEER_SCRIPTS[peer],
                         *shape], {**worker_env(), **common.peer_env(FLAGS.peer_onednn)}))
  print(f"{name}: {size} batch {batch} seq {seq} predictions {predictions}, "
        f"{FLAGS.rounds} rounds x {steps} steps", flush=True)
  if FLAGS.pairwise and len(specs) > 2:
    groups = [[specs[0], spec] for spec in specs[1:]]
  else:
    groups = [specs]
  flops = model_flops_per_sequence(size, seq, predictions)

  def rates(step_seconds):
    step = common.median(step_seconds)
    return {"sequences_per_second": batch / step, "tokens_per_second": batch * seq / step,
            "median_step_seconds": step,
            "model_gflops_per_second": flops * batch / step / 1e9}

  results, ours_steps, ours_peak = {}, [], 0.0
  for group in groups:
    if len(groups) > 1:
      print(f" pair: {' and '.join(spec[0] for spec in group)}", flush=True)
    workers = common.start_sequential(group)
    common.alternate(workers, FLAGS.rounds, steps)
    for worker in workers[1:] if len(groups) > 1 else workers:
      results[worker.name] = dict(rates(worker.step_seconds), peak_rss_mb=worker.peak_rss_mb,
                                  info=worker.info, steps=len(worker.step_seconds))
      if len(groups) > 1:
        pair = rates(workers[0].step_seconds)["sequences_per_second"]
        results[worker.name]["ours_sequences_per_second_in_pair"] = pair
    if len(groups) > 1:
      ours_steps += workers[0].step_seconds
      ours_peak = max(ours_peak, workers[0].peak_rss_mb or 0.0)
      results["ours"] = dict(rates(ours_steps), peak_rss_mb=ours_peak or None,
                             info=workers[0].info, steps=len(ours_steps))
  return {"size": size, "batch_size": batch, "seq_length": seq, "predictions": predictions,
          "results": results, "pairwise": FLAGS.pairwise}


def label(system):
  if system.startswith("ours_") and system[len("ours_"):] in VARIANTS:
    return f"bert_tf, {system[len('ours_'):]}"
  return common.PEER_LABELS[system]


def report(configs, current_peak):
  """Prints one table over `configs` ({name: entry of the results file}) and, with
  --write_readme, writes it with each configuration's command to the README."""
  header = ["config", "batch x seq", "system", "seq/s", "tokens/s", "model GFLOP/s", "MFU",
            "peak RSS MiB", "ours/this"]
  rows, notes = [], []
  for name in sorted(configs, key=lambda n: list(CONFIGS).index(n)):
    run = configs[name]
    # MFU against the peak measured in the same hour as the run, where it was recorded.
    peak = run.get("matmul_peak_gflops") or current_peak
    peers = [p for p in run["results"] if p not in OURS]
    ours = run["results"]["ours"]["sequences_per_second"]
    # The peer with the lowest ours/peer ratio (its pair's ours in a pairwise run).
    ratios = {p: run["results"][p].get("ours_sequences_per_second_in_pair", ours) /
                 run["results"][p]["sequences_per_second"] for p in peers}
    best = min(ratios, key=ratios.get) if ratios else None
    best_peer = run["results"][best]["sequences_per_second"] if best else 0.0
    order = [*OURS, "model_garden", "keras_hub", "hf"]
    systems = sorted(run["results"], key=lambda k: order.index(k) if k in order else len(order))
    for system in systems:
      r = run["results"][system]
      mine = r.get("ours_sequences_per_second_in_pair", ours)
      ratio = "" if system == "ours" else f"{mine / r['sequences_per_second']:.2f}x"
      mfu = f"{100 * r['model_gflops_per_second'] / peak:.0f}%" if peak else "n/a"
      rows.append([name, f"{run['batch_size']}x{run['seq_length']}",
                   label(system), f"{r['sequences_per_second']:.2f}",
                   f"{r['tokens_per_second']:.0f}", f"{r['model_gflops_per_second']:.1f}",
                   mfu, f"{r['peak_rss_mb']:.0f}" if r["peak_rss_mb"] else "n/a", ratio])
    pairwise = ", ours beside one peer at a time" if run.get("pairwise") else ""
    peak_note = f", matmul peak {peak:.1f} GFLOP/s" if peak else ""
    notes.append(f"- {name}: `{run['command']}` ({run['rounds']} interleaved rounds"
                 f"{pairwise}; {run['machine']}{peak_note})")
    if best_peer:
      notes[-1] += (f"; ours/best peer ({label(best)}) {ratios[best]:.2f}x")
  table = common.markdown_table(header, rows)
  print(table)
  print("\n".join(notes))
  if FLAGS.write_readme:
    common.update_readme_section(RESULTS, f"{table}\n\n" + "\n".join(notes))


def main(argv):
  del argv
  for name in FLAGS.configs:
    if name not in CONFIGS:
      raise app.UsageError(f"Unknown config '{name}'; configs: {', '.join(CONFIGS)}")
  for variant in FLAGS.variants:
    if variant not in VARIANTS:
      raise app.UsageError(f"Unknown variant '{variant}'; variants: {', '.join(VARIANTS)}")
  peak = common.matmul_peak_gflops()
  if FLAGS.report_only:
    report(common.read_results(RESULTS).get("configs", {}), peak)
    return
  if FLAGS.write_readme:
    common.require_readme_section(RESULTS)
  peers = common.ready_peers(FLAGS.peers, FLAGS.install_peers, FLAGS.venv_root)
  command = common.command_line()
  runs = {}
  for name in FLAGS.configs:
    runs[name] = dict(run_config(name, peers), command=command, rounds=FLAGS.rounds,
                      machine=common.machine_description(), matmul_peak_gflops=peak)
  if FLAGS.write_readme:
    print(f"results: {common.merge_results(RESULTS, 'configs', runs)}")
    report(common.read_results(RESULTS)["configs"], peak)
  else:
    # A check, not a figure of record: the results file stays as it is.
    path = os.path.join(common.LOG_DIR, f"{RESULTS}.json")
    with open(path, "w") as f:
      json.dump({"configs": runs}, f, indent=1, sort_keys=True)
    print(f"results: {path}")
    report(runs, peak)
  print(f"pretraining_step: {len(runs)} configs, systems "
        f"{','.join(['ours', *(f'ours_{v}' for v in FLAGS.variants), *peers])}; "
        f"command: {command}")


if __name__ == "__main__":
  app.run(main)
