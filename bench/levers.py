"""A/B test of the speed levers of our pretraining step, all variants in one run.

Each variant is our pretraining-step worker (bench/ours_pretraining_worker.py) with one
lever switched away from the default that bench/pretraining_step.py times; all run in
their own processes, taking turns round after round, and the table gives each one's
median step time and its speed relative to the default (above 1: the lever as switched
here is faster than the default).

  python bench/levers.py --config=mini --variants=all
  python bench/levers.py --config=base --variants=default,no_xla,unfused_optimizer
  python bench/levers.py --config=mini --compare_tree=/tmp/other_checkout
"""

import os
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # pylint: disable=g-import-not-at-top,wrong-import-position
import pretraining_step  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_string("config", "mini", "One of bench/pretraining_step.py's configs.")
flags.DEFINE_list("variants", ["all"], "Variants to run ('all' or names below).")
flags.DEFINE_integer("lever_rounds", 5, "Interleaved rounds.")
flags.DEFINE_integer("lever_steps", 3, "Timed steps per variant per round.")
flags.DEFINE_string("compare_tree", "", "Also time the worker of another bert_tf checkout "
                    "(its bench/ours_pretraining_worker.py and bert_tf/, its defaults, "
                    "jit_compile as --jit_compile).")
flags.DEFINE_integer("group_size", 5, "Variants alive at once besides the default (each "
                     "worker holds a whole model and optimizer: about 2 GiB at mini, "
                     "4.5 GiB at base). Each group runs beside a fresh default worker and "
                     "its speeds are relative to that group's default.")
flags.DEFINE_bool("lever_write_readme", True, "Update the levers section of bench/README.md.")
flags.DEFINE_string("lever_table", "", "Name of the results file and README section: "
                    "levers_CONFIG by default, levers_CONFIG_NAME with a name (a second "
                    "table beside the first).")

# name: (what it changes, extra worker flags, extra environment).
# The default is what bench/pretraining_step.py times: no XLA for the forward/backward,
# the fused optimizer, the last block only at the read positions, TensorFlow's thread
# defaults, float32, 1 step per call.
VARIANTS = {
    "default": ("the default step", [], {}),
    "xla": ("forward/backward XLA-compiled (runtime.jit_compile=true)",
            ["--jit_compile", "1"], {}),
    "unfused_optimizer": ("AdamW as separate TensorFlow kernels, not one XLA function "
                          "per variable", ["--fused_optimizer", "0"], {}),
    "full_last_layer": ("last block over all positions (not only [CLS] and the masked "
                        "ones)", ["--sparse_last_layer", "0"], {}),
    "no_xla_fusion": ("LayerNorm, bias + GELU, each block half's bias + dropout + "
                      "residual + LayerNorm and the pretraining loss as plain TensorFlow "
                      "ops, not XLA-fused (bert_tf.layers.fusion)", ["--xla_fusion", "0"],
                      {}),
    "keras_dense": ("Keras's Dense for the intermediate and masked-LM transform layers "
                    "(transpose_b input gradient, separate bias and GELU) instead of "
                    "bert_tf.layers.Dense", ["--keras_dense", "1"], {}),
    "keras_dropout": ("Keras's dropout mask (a float32 uniform per element, 'auto_select' "
                      "generator) instead of bert_tf.layers.Dropout's 16 Philox bits",
                      ["--keras_dropout", "1"], {}),
    "steps_per_loop_10": ("10 steps per tf.function call (trainer.steps_per_loop=10)",
                          ["--steps_per_loop", "10"], {}),
    "inter_op_1": ("1 inter-op thread (TensorFlow's default: one per core)",
                   ["--inter_op_threads", "1"], {}),
    "intra_op_1": ("1 intra-op thread", ["--intra_op_threads", "1"], {}),
    "intra_op_4": ("4 intra-op threads (two per core)", ["--intra_op_threads", "4"], {}),
    "autojit_fusible": ("XLA auto-clustering of the element-wise ops only, matmuls left to "
                        "oneDNN (TF_XLA_FLAGS=--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit "
                        "--tf_xla_ops_to_cluster=FUSIBLE)", [],
                        {"TF_XLA_FLAGS": "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit "
                                         "--tf_xla_ops_to_cluster=FUSIBLE"}),
    "no_onednn": ("oneDNN kernels off (TF_ENABLE_ONEDNN_OPTS=0): Eigen matmuls",
                  [], {"TF_ENABLE_ONEDNN_OPTS": "0"}),
    "mirrored_2cpu": ("MirroredStrategy over 2 logical CPU devices, half the batch each, 1 "
                      "intra-op thread (data parallelism across the cores instead of "
                      "splitting each op)",
                      ["--num_cpu_devices", "2", "--intra_op_threads", "1"], {}),
    "bfloat16": ("mixed_bfloat16 (this CPU has AVX512_BF16; peers run float32)",
                 ["--mixed_precision", "mixed_bfloat16"], {}),
}


def main(argv):
  del argv
  if FLAGS.config not in pretraining_step.CONFIGS:
    raise app.UsageError(f"Unknown config '{FLAGS.config}'; configs: "
                         f"{', '.join(pretraining_step.CONFIGS)}")
  names = list(VARIANTS) if FLAGS.variants == ["all"] else FLAGS.variants
  for name in names:
    if name not in VARIANTS:
      raise app.UsageError(f"Unknown variant '{name}'; variants: {', '.join(VARIANTS)}")
  if "default" not in names:
    names.insert(0, "default")
  section = f"levers_{FLAGS.config}" + (f"_{FLAGS.lever_table}" if FLAGS.lever_table else "")
  if FLAGS.lever_write_readme:
    common.require_readme_section(section)
  size, batch, seq, predictions, _ = pretraining_step.CONFIGS[FLAGS.config]
  shape = ["--size", size, "--batch_size", str(batch), "--seq_length", str(seq),
           "--predictions", str(predictions)]
  base_env = {"CUDA_VISIBLE_DEVICES": ""}
  specs = []
  for name in names:
    _, extra, env = VARIANTS[name]
    flags_ = ["--jit_compile", "0", *extra]
    specs.append((name, [sys.executable, "bench/ours_pretraining_worker.py", *shape,
                         *flags_], {**base_env, **env}))
  if FLAGS.compare_tree:
    tree = os.path.abspath(FLAGS.compare_tree)
    specs.append(("compare_tree", [sys.executable,
                                   os.path.join(tree, "bench/ours_pretraining_worker.py"),
                                   *shape, "--jit_compile", str(int(FLAGS.jit_compile))],
                  {**base_env, "PYTHONPATH": os.path.join(tree, "bench", "peers") +
                   os.pathsep + tree}))
  default_spec, variant_specs = specs[0], specs[1:]
  groups = [variant_specs[i:i + FLAGS.group_size]
            for i in range(0, len(variant_specs), FLAGS.group_size)] or [[]]
  print(f"levers on {FLAGS.config} ({size}, batch {batch}, seq {seq}): "
        f"{', '.join(s[0] for s in specs)}; {len(groups)} group(s), each beside the default; "
        f"{FLAGS.lever_rounds} rounds x {FLAGS.lever_steps} steps", flush=True)
  rows, results = [], {}
  for g, group in enumerate(groups):
    print(f" group {g + 1}/{len(groups)}: {', '.join(s[0] for s in group)}", flush=True)
    workers = common.start_sequential([default_spec, *group])
    common.alternate(workers, FLAGS.lever_rounds, FLAGS.lever_steps)
    default = common.median(workers[0].step_seconds)
    default_cpu = common.median(workers[0].cpu_seconds)
    for worker in workers:
      if worker.name == "default" and g > 0:
        key = f"default (group {g + 1})"
      else:
        key = worker.name
      step = common.median(worker.step_seconds)
      cpu = common.median(worker.cpu_seconds)
      what = (VARIANTS[worker.name][0] if worker.name in VARIANTS
              else f"bert_tf from {FLAGS.compare_tree}")
      if worker.name == "default" and len(groups) > 1:
        what = f"the default step (reference of group {g + 1})"
      results[key] = {"median_step_seconds": step, "sequences_per_second": batch / step,
                      "median_cpu_seconds": cpu, "peak_rss_mb": worker.peak_rss_mb,
                      "info": worker.info, "steps": len(worker.step_seconds), "group": g + 1}
      rows.append([key, what, f"{step * 1000:.0f}", f"{batch / step:.2f}",
                   f"{default / step:.2f}x", f"{cpu * 1000:.0f}",
                   f"{default_cpu / cpu:.2f}x",
                   f"{worker.peak_rss_mb:.0f}" if worker.peak_rss_mb else "n/a"])
  table = common.markdown_table(["variant", "what changes", "median ms/step", "seq/s",
                                 "speed vs default", "CPU ms/step", "CPU time vs default",
                                 "peak RSS MiB"], rows)
  print(table)
  command = common.command_line()
  common.write_results(section, {"command": command, "results": results,
                                 "machine": common.machine_description()})
  if FLAGS.lever_write_readme:
    common.update_readme_section(
        section,
        f"Command: `{command}` (medians of {FLAGS.lever_rounds} interleaved rounds x "
        f"{FLAGS.lever_steps} steps, in groups of at most {FLAGS.group_size} variants "
        f"each timed beside its own default worker, speeds relative to that default; "
        f"{size}, batch {batch}, seq {seq})\n\n{table}")
  print(f"levers: {len(specs)} variants on {FLAGS.config}; command: {command}")


if __name__ == "__main__":
  app.run(main)
