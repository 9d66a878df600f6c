"""Pretraining-step throughput of bert_tf against Model Garden, KerasHub and Hugging Face.

A full step each: masked LM on `predictions` gathered positions + next-sentence
prediction, backward, AdamW (weight decay 0.01 except LayerNorm and biases, global-norm
clipping at 1.0), on one batch of random ids held in memory, identical for every system.
Ours is the TensorFlow engine's loop (TensorFlowEngine.train_loop_function).
Every system runs in its own process (each peer in its own virtual environment, see
--install_peers); the processes take turns, round after round, and the table reports
each one's median sequences/s and the ratio ours/peer within the same run.

MFU: each system's model FLOP/s (bert_tf.utils.model_flops) over the rate of a matrix product in its
framework and precision (bench/matmul_peak.py), timed as one more system of the same
rounds, so that the denominator shares the moments of the machine the steps had.

--variants adds our worker with one speed lever switched away from its default as one
more system each (an A/B of the lever in the same run; VARIANTS below); --baseline adds
the worker of another checkout (an A/B of a change). Each configuration's figures go to
its entry of bench/results/pretraining_step.json (the other entries are kept), or with
--nowrite_readme (an A/B check) to the run's own folder (bench/common.py, run_dir).

  python -m bench.pretraining_step --configs=mini,small,base --install_peers
  python -m bench.pretraining_step --configs=base512 --pairwise --rounds=2
  python -m bench.pretraining_step --configs=mini,base --peers= --baseline=/tmp/before \
      --variants=xla --nowrite_readme
"""

import os
import sys

from absl import app
from absl import flags

from bench import common
from bench import driver
from bench import flops
from bench import matmul_peak
from bench import peer_envs
from bench import stats
from bench.peers import protocol
from bert_tf.utils import model_flops

FLAGS = flags.FLAGS
flags.DEFINE_list("configs", ["mini", "small", "base"],
                  "Configurations to run, among: mini, small, base, base512.")
flags.DEFINE_list("peers", ["model_garden", "keras_hub", "hf"],
                  "Peers to compare against (empty for ours alone).")
flags.DEFINE_integer("rounds", 5, "Interleaved rounds (at least 5 for figures of "
                     "record).")
flags.DEFINE_integer("steps_per_round", 0, "Timed steps per system per round "
                     "(0: a default per configuration).")
flags.DEFINE_integer("steps_per_loop", 1, "Steps per call of our trainer's loop.")
flags.DEFINE_bool("jit_compile", False, "XLA-compile our forward/backward "
                  "(runtime.jit_compile).")
flags.DEFINE_enum("mixed_precision", "float32", ["float32", "mixed_bfloat16", "mixed_float16"],
                  "runtime.mixed_precision_dtype of ours and --baseline's, and the peers' "
                  "(torch: bf16 autocast; mixed_float16: float32).")
flags.DEFINE_list("variants", [], "Our step with one lever switched, each as one more "
                  "system: any of the names of VARIANTS in this file.")
flags.DEFINE_bool("peer_onednn", True, "Run the TensorFlow peers with oneDNN on "
                  "(TF_ENABLE_ONEDNN_OPTS=1, as bert_tf sets it for ours): their best CPU "
                  "setting. --nopeer_onednn gives TensorFlow's own default, which leaves "
                  "it off on CPUs without AVX-512 VNNI/BF16 or AMX.")
flags.DEFINE_integer("peer_intra_op_threads", 0, "Intra-op threads of every peer (0: "
                     "TensorFlow's default; torch: one per core).")
flags.DEFINE_integer("peer_inter_op_threads", 0, "Inter-op threads of every peer (0: the "
                     "framework's default).")
driver.define_protocol_flags(compete_alternate=True)
flags.DEFINE_string("baseline", "", "Path of another checkout of bert_tf (for example a "
                    "`git worktree` of the commit before a change): its own worker runs as "
                    "one more system, 'baseline', interleaved with ours, so that a change's "
                    "effect on speed is an A/B within one run.")
flags.DEFINE_string("input_path", "", "Pretraining TFRecords (comma-separated) that ours, its "
                    "variants and --baseline read through their own reader instead of the "
                    "in-memory batch (with --peers= --nowrite_readme).")
flags.DEFINE_bool("install_peers", False, "Create the peers' virtual environments first.")
flags.DEFINE_string("venv_root", peer_envs.DEFAULT_VENV_ROOT, "Where the peers' venvs live.")
flags.DEFINE_string("device", "cpu", "cpu or gpu. On gpu, the workers see the GPU; on "
                    "cpu, CUDA_VISIBLE_DEVICES is emptied for every worker.")
flags.DEFINE_bool("pairwise", False, "Keep only two systems alive at a time: ours beside "
                  "each peer in turn (a fresh worker of ours per pair), for shapes where "
                  "all systems at once do not fit in memory (base512 needs about 6.5 GB "
                  "each). Each ratio then comes from its own pair.")
flags.DEFINE_bool("report_only", False, "Time nothing: rebuild the table from "
                  "bench/results/pretraining_step.json.")
flags.DEFINE_bool("write_readme", True, "Record the run: its configurations' entries in "
                  "bench/results/pretraining_step.json and its table (without "
                  "it, the results go to the run's own folder).")

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
    "no_xla_fusion": ("the element-wise pieces of bert_tf.kernels.tensorflow_cpu.fused as "
                      "plain TensorFlow ops", ["--xla_fusion", "0"], {}),
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
    "onednn_caller_thread": ("oneDNN's parallel regions also run on the calling thread",
                             [], {"TF_ONEDNN_THREADPOOL_USE_CALLER_THREAD": "1"}),
    "inter_op_1_intra_op_2": ("1 inter-op thread, 2 intra-op threads",
                              ["--inter_op_threads", "1", "--intra_op_threads", "2"], {}),
    "xla_cpu_1_thread": ("XLA's CPU runtime single-threaded (the fused pieces)", [],
                         {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}),
    "mirrored_2cpu": ("MirroredStrategy over 2 logical CPU devices of 1 thread each",
                      ["--num_cpu_devices", "2", "--intra_op_threads", "1"], {}),
    "autojit_fusible": ("XLA auto-clustering of the element-wise ops only",
                        [], {"TF_XLA_FLAGS": "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit "
                                             "--tf_xla_ops_to_cluster=FUSIBLE"}),
    "no_onednn": ("oneDNN kernels off (Eigen's)", [], {"TF_ENABLE_ONEDNN_OPTS": "0"}),
    "bfloat16": ("mixed_bfloat16 (ours only: the peers run --mixed_precision)",
                 ["--mixed_precision", "mixed_bfloat16"], {}),
}
# Systems of ours: never the "best peer" of a ratio.
OURS = ("ours", "baseline", *(f"ours_{v}" for v in VARIANTS))
# The framework of each peer's products (their precision is its --mixed_precision's).
PEER_FRAMEWORKS = {"model_garden": "tensorflow", "keras_hub": "tensorflow", "hf": "torch"}
# runtime.mixed_precision_dtype -> the dtype of the products.
POLICY_DTYPES = {"float32": "float32", "mixed_bfloat16": "bfloat16",
                 "mixed_float16": "float16"}
MATMUL_PREFIX = "matmul_"
PEER_MODULES = {
    "model_garden": "bench.peers.model_garden_pretraining",
    "keras_hub": "bench.peers.keras_hub_pretraining",
    "hf": "bench.peers.hf_pretraining",
}


def model_flops_per_sequence(size, seq_length, predictions, vocab_size=30522):
  """Training FLOPs of one sequence of a bench/peers/protocol.py size
  (bert_tf.utils.model_flops)."""
  layers, hidden, _, intermediate = protocol.size_args(size)
  return model_flops.pretraining_flops_per_sequence(layers, hidden, intermediate, vocab_size,
                                                    seq_length, predictions)


def matmul_of(system, argv):
  """(framework, dtype) of the products of `system`'s step, whose worker runs `argv`:
  a peer's framework from PEER_FRAMEWORKS (ours: TensorFlow), the precision of the last
  --mixed_precision of its command."""
  policy = argv[len(argv) - argv[::-1].index("--mixed_precision")]
  return PEER_FRAMEWORKS.get(system, "tensorflow"), POLICY_DTYPES[policy]


def matmul_specs(systems, peer_threads):
  """The product workers (bench/matmul_peak.py --serve) the `systems` ([(name, argv,
  env)]) divide by, one per framework and precision: torch's in the Hugging Face peer's
  environment, with its threads; TensorFlow's in ours, with its oneDNN setting."""
  specs = {}
  for name, argv, _ in systems:
    framework, dtype = matmul_of(name, argv)
    key = f"{MATMUL_PREFIX}{framework}_{dtype}"
    if key in specs:
      continue
    python = (peer_envs.peer_python("hf", FLAGS.venv_root) if framework == "torch"
              else sys.executable)
    specs[key] = (key, matmul_peak.worker_argv(
        framework, dtype, python, peer_threads if name in PEER_FRAMEWORKS else ()),
                  worker_env())
  return list(specs.values())


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
  records = ["--input_path", FLAGS.input_path] if FLAGS.input_path else []
  settings = [*shape, *records, "--steps_per_loop", str(FLAGS.steps_per_loop),
              "--jit_compile", str(int(FLAGS.jit_compile)),
              "--mixed_precision", FLAGS.mixed_precision]
  ours = [sys.executable, "-m", "bench.ours_pretraining_worker", *settings]
  specs = [("ours", ours, worker_env())]
  for variant in FLAGS.variants:
    _, extra, env = VARIANTS[variant]
    specs.append((f"ours_{variant}", ours + extra, {**worker_env(), **env}))
  if FLAGS.baseline:
    baseline = os.path.abspath(FLAGS.baseline)
    # Run as a file with its checkout first on the path: serves checkouts where bench/
    # is a package and older ones whose workers put their own folders on the path.
    worker = os.path.join(baseline, "bench", "ours_pretraining_worker.py")
    specs.append(("baseline", [sys.executable, worker, *settings],
                  {**worker_env(), "PYTHONPATH": baseline}))
  peer_threads = ["--intra_op_threads", str(FLAGS.peer_intra_op_threads),
                  "--inter_op_threads", str(FLAGS.peer_inter_op_threads)]
  peer_precision = (FLAGS.mixed_precision if FLAGS.mixed_precision
                    in protocol.MIXED_PRECISION_POLICIES else "float32")
  for peer in peers:
    specs.append((peer, [peer_envs.peer_python(peer, FLAGS.venv_root), "-m",
                         PEER_MODULES[peer], *shape, *peer_threads,
                         "--mixed_precision", peer_precision],
                  {**worker_env(), **peer_envs.peer_env(FLAGS.peer_onednn)}))
  print(f"{name}: {size} batch {batch} seq {seq} predictions {predictions}, "
        f"{FLAGS.rounds} rounds x {steps} steps", flush=True)
  if FLAGS.pairwise and len(specs) > 2:
    groups = [[specs[0], spec] for spec in specs[1:]]
  else:
    groups = [specs]
  groups = [group + matmul_specs(group, peer_threads) for group in groups]
  product_of = {spec[0]: f"{MATMUL_PREFIX}{'_'.join(matmul_of(spec[0], spec[1]))}"
                for spec in specs}
  sequence_flops = model_flops_per_sequence(size, seq, predictions)

  def rates(rounds):
    summary = stats.step_summary(rounds)
    step = summary["median_step_seconds"]
    return {"sequences_per_second": batch / step, "tokens_per_second": batch * seq / step,
            "model_gflops_per_second": sequence_flops * batch / step / 1e9, **summary}

  results, rounds_of_record, ours_rounds, ours_cpu_rounds, ours_peak = {}, [], [], [], 0.0
  products = {}
  for group in groups:
    if len(groups) > 1:
      print(f" pair: {' and '.join(spec[0] for spec in group)}", flush=True)
    workers = driver.start_sequential(group)
    records = driver.alternate(workers, FLAGS.rounds, steps, FLAGS.quiet_load,
                               FLAGS.quiet_timeout, FLAGS.compete, FLAGS.compete_alternate)
    rounds_of_record.append({"systems": [w.name for w in workers], "rounds": records})
    for worker in workers:
      if worker.name.startswith(MATMUL_PREFIX):
        entry = products.setdefault(worker.name, {**worker.info, "step_seconds": []})
        entry["step_seconds"] += worker.step_seconds
    workers = [w for w in workers if not w.name.startswith(MATMUL_PREFIX)]
    for worker in workers[1:] if len(groups) > 1 else workers:
      results[worker.name] = dict(rates(worker.rounds), peak_rss_mb=worker.peak_rss_mb,
                                  info=worker.info, steps=len(worker.step_seconds),
                                  median_cpu_seconds=stats.median(worker.cpu_seconds))
      if worker is not workers[0]:
        # Ours against this system within the rounds they shared.
        results[worker.name]["ours_over_this"] = stats.ratio_with_interval(
            workers[0].rounds, worker.rounds)
      if FLAGS.compete_alternate:
        results[worker.name]["under_load"] = under_load(
            workers[0].rounds, workers[0].cpu_rounds, worker.rounds, worker.cpu_rounds)
    if len(groups) > 1:
      ours_rounds += workers[0].rounds
      ours_cpu_rounds += workers[0].cpu_rounds
      ours_peak = max(ours_peak, workers[0].peak_rss_mb or 0.0)
      results["ours"] = dict(rates(ours_rounds), peak_rss_mb=ours_peak or None,
                             info=workers[0].info, steps=sum(map(len, ours_rounds)))
      if FLAGS.compete_alternate:
        # Every pair contributes whole quiet/loaded pairs, so the pooled rounds keep
        # their alternation.
        results["ours"]["under_load"] = under_load(
            ours_rounds, ours_cpu_rounds, ours_rounds, ours_cpu_rounds)
  for entry in products.values():
    entry.update(matmul_peak.rate_of_steps(entry["flops_per_step"], entry["step_seconds"]))
  for system, r in results.items():
    r["matmul"] = product_of[system]
    r["utilisation"] = flops.utilisation(
        1e9 * r["model_gflops_per_second"],
        products.get(r["matmul"], {}).get("peak_flops_per_second"))
  return {"size": size, "batch_size": batch, "seq_length": seq, "predictions": predictions,
          "mixed_precision": FLAGS.mixed_precision, "results": results, "pairwise": FLAGS.pairwise, "compete": FLAGS.compete,
          "compete_alternate": FLAGS.compete_alternate, "matmul": products,
          "load": stats.load_summary([r for g in rounds_of_record for r in g["rounds"]]),
          "round_records": rounds_of_record}


def label(system):
  if system.startswith("ours_") and system[len("ours_"):] in VARIANTS:
    return f"bert_tf, {system[len('ours_'):]}"
  return peer_envs.PEER_LABELS[system]


def under_load(ours_rounds, ours_cpu_rounds, rounds, cpu_rounds):
  """Of a --compete_alternate run (rounds in quiet/loaded pairs): a system's quiet and
  loaded median steps and CPU seconds per step, its slowdown (loaded over quiet,
  bootstrap over the pairs) and, for a system other than ours (given ours' rounds),
  ours/this in the quiet and in the loaded rounds."""
  quiet, loaded = rounds[0::2], rounds[1::2]
  # Process CPU time per step: threads that spin or wait on a busy core show here.
  entry = {"quiet_median_step_seconds": stats.pooled_median(quiet),
           "loaded_median_step_seconds": stats.pooled_median(loaded),
           "quiet_median_cpu_seconds": stats.pooled_median(cpu_rounds[0::2]),
           "loaded_median_cpu_seconds": stats.pooled_median(cpu_rounds[1::2]),
           "slowdown": stats.ratio_with_interval(quiet, loaded)}
  if rounds is not ours_rounds:
    entry["ours_over_this_quiet"] = stats.ratio_with_interval(ours_rounds[0::2], quiet)
    entry["ours_over_this_loaded"] = stats.ratio_with_interval(ours_rounds[1::2], loaded)
  return entry


def load_table(configs):
  """The --compete_alternate runs among `configs` as one markdown table ('' if none)."""
  rows = []
  order = [*OURS, "model_garden", "keras_hub", "hf"]
  for key, run in configs.items():
    for system in sorted(run["results"], key=lambda k: order.index(k) if k in order else 99):
      r = run["results"][system]
      if "under_load" not in r:
        continue
      u = r["under_load"]
      fmt = lambda x: stats.format_interval(x["ratio"], x["interval"]) if x else ""
      cpu = lambda k: f" ({u[k]:.1f} CPU s)" if k in u else ""
      rows.append([key, label(system),
                   f"{1000 * u['quiet_median_step_seconds']:.0f}"
                   f"{cpu('quiet_median_cpu_seconds')}",
                   f"{1000 * u['loaded_median_step_seconds']:.0f}"
                   f"{cpu('loaded_median_cpu_seconds')}", fmt(u["slowdown"]),
                   fmt(u.get("ours_over_this_quiet")), fmt(u.get("ours_over_this_loaded"))])
  if not rows:
    return ""
  return common.markdown_table(
      ["config", "system", "quiet median step ms (CPU s)", "with a competing job, ms",
       "slowdown [95% CI]", "ours/this quiet [95% CI]", "ours/this loaded [95% CI]"], rows)


def config_key(name, compete):
  """The results file's key of a run: the configuration, `_bf16` (`_fp16`) when every
  system ran mixed_bfloat16 (mixed_float16), `_compete` when a competing job ran (a run
  under load does not replace the quiet one), `_compete_alternate` for quiet/loaded pairs."""
  name += {"float32": "", "mixed_bfloat16": "_bf16",
           "mixed_float16": "_fp16"}[FLAGS.mixed_precision]
  if FLAGS.compete_alternate:
    return f"{name}_compete_alternate"
  return f"{name}_compete" if compete else name


def mfu_cell(run, result):
  """A system's utilisation against its own run's product (flops.utilisation_text: never
  above 100%); 'n/a' for an entry recorded before runs timed their own products."""
  if "matmul" not in run:
    return "n/a"
  return flops.utilisation_text(result.get("utilisation"))


def matmul_note(run):
  """The note of a run's products (matmul_peak.describe), or that it had none."""
  if "matmul" not in run:
    return "; no matmul rate of its own run (MFU not reported)"
  rates = [matmul_peak.describe(p, p["framework"], p["dtype"])
           for p in run["matmul"].values()]
  return f"; MFU against the products of the same rounds: {', '.join(rates)}"


def report(configs):
  """Prints one table over `configs` ({key: entry of the results file}) and, with
  --write_readme, writes it with each configuration's command to its table.

  Entries recorded before the round protocol (no per-round step times) are left out."""
  header = ["config", "batch x seq", "system", "median step ms [IQR]", "seq/s", "tokens/s",
            "model GFLOP/s", "MFU", "peak RSS MiB", "ours/this [95% CI]"]
  rows, notes = [], []
  current = {k: v for k, v in configs.items() if "round_records" in v}

  def order_key(key):
    name = key.split("_")[0]
    return (list(CONFIGS).index(name) if name in CONFIGS else len(CONFIGS), key)

  for key in sorted(current, key=order_key):
    run = current[key]
    peers = [p for p in run["results"] if p not in OURS]
    ratios = {p: run["results"][p]["ours_over_this"] for p in peers}
    best = min(ratios, key=lambda p: ratios[p]["ratio"]) if ratios else None
    order = [*OURS, "model_garden", "keras_hub", "hf"]
    systems = sorted(run["results"], key=lambda k: order.index(k) if k in order else len(order))
    for system in systems:
      r = run["results"][system]
      ratio = r.get("ours_over_this")
      mfu = mfu_cell(run, r)
      rows.append([key, f"{run['batch_size']}x{run['seq_length']}", label(system),
                   f"{1000 * r['median_step_seconds']:.0f} "
                   f"[{1000 * r['step_seconds_q1']:.0f}-{1000 * r['step_seconds_q3']:.0f}]",
                   f"{r['sequences_per_second']:.2f}", f"{r['tokens_per_second']:.0f}",
                   f"{r['model_gflops_per_second']:.1f}", mfu,
                   f"{r['peak_rss_mb']:.0f}" if r["peak_rss_mb"] else "n/a",
                   stats.format_interval(ratio["ratio"], ratio["interval"]) if ratio else ""])
    pairwise = ", ours beside one peer at a time" if run.get("pairwise") else ""
    rounds = (f"{run['rounds']} pairs of a quiet and a loaded round"
              if run.get("compete_alternate") else f"{run['rounds']} rounds")
    notes.append(f"- {key}: `{run['command']}` ({rounds}{pairwise}; "
                 f"{run['machine']}; {run['load']}){matmul_note(run)}")
    if best:
      notes[-1] += (f"; ours/best peer ({label(best)}) "
                    f"{stats.format_interval(ratios[best]['ratio'], ratios[best]['interval'])}")
  table = common.markdown_table(header, rows)
  loads = load_table(current)
  if loads:
    table += "\n\nUnder load (`--compete_alternate`: quiet and loaded rounds in pairs):\n\n" + loads
  print(table)
  print("\n".join(notes))
  if FLAGS.write_readme:
    common.update_table(RESULTS, f"{table}\n\n" + "\n".join(notes))


def main(argv):
  del argv
  for name, known, what in [*((n, CONFIGS, "config") for n in FLAGS.configs),
                            *((v, VARIANTS, "variant") for v in FLAGS.variants)]:
    if name not in known:
      raise app.UsageError(f"Unknown {what} '{name}'; {what}s: {', '.join(known)}")
  if FLAGS.input_path and (FLAGS.peers or FLAGS.write_readme):
    raise app.UsageError("--input_path: a check against ours or --baseline, not a figure "
                         "of record (the peers read no TFRecords): give --peers= "
                         "--nowrite_readme with it")
  if FLAGS.report_only:
    report(common.read_recorded_results(RESULTS).get("configs", {}))
    return
  driver.check_rounds_of_record(FLAGS.rounds, FLAGS.write_readme)
  if FLAGS.write_readme:
    common.require_table(RESULTS)
  peers = peer_envs.ready_peers(FLAGS.peers, FLAGS.install_peers, FLAGS.venv_root)
  command = common.command_line()
  runs = {}
  for name in FLAGS.configs:
    runs[config_key(name, FLAGS.compete)] = dict(
        run_config(name, peers), command=command, rounds=FLAGS.rounds,
        machine=common.machine_description())
  if FLAGS.write_readme:
    print(f"results: {common.merge_results(RESULTS, 'configs', runs)}")
    report(common.read_results(RESULTS)["configs"])
  else:
    # A check, not a figure of record: its results go to its own folder.
    print(f"results: {common.write_results(RESULTS, {'configs': runs})}")
    report(runs)
  print(f"pretraining_step: {len(runs)} configs, systems "
        f"{','.join(['ours', *(f'ours_{v}' for v in FLAGS.variants), *peers])}; "
        f"command: {command}")


if __name__ == "__main__":
  app.run(main)
