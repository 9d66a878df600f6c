"""Trains and/or evaluates a bert_tf experiment, on TensorFlow (under a tf.distribute
strategy) or on JAX (data parallel over every device, jax.distributed across hosts).

Backend: --backend=jax (or runtime.backend: jax in the YAML or --params_override, or
KERAS_BACKEND=jax; default tensorflow). The strategies, TPUStrategy and the fused CPU
kernels are TensorFlow's. On JAX, several hosts start together with
KERAS_DISTRIBUTION_JOB_ADDRESSES=host0:1234 KERAS_DISTRIBUTION_NUM_PROCESSES=N
KERAS_DISTRIBUTION_PROCESS_ID=i on each. Either backend writes checkpoints that the
exporter and the other backend's --init_checkpoint read (JAX: portable ckpt-N.h5);
params.yaml and the first log line name the backend.

Pretrain BERT-tiny on your TFRecords:

  python tools/train.py --experiment=pretraining_bert_tiny --model_dir=runs/tiny \\
    --params_override=train_data.input_path='data/pretrain-*.tfrecord'

Configs: --experiment names a file in official_configs/experiments/ (by stem) or is a
YAML path; --config_file adds YAML files merged in order; --params_override takes
`a.b=v` items separated by commas. The flags --backend, --distribution_strategy, --tpu,
--num_gpus, --mixed_precision_dtype, --jit_compile, --init_checkpoint and
--validate_inputs are shorthands for the runtime.* / task.* / train_data.* fields of the
same names. The resolved config
is written to MODEL_DIR/params.yaml; rerunning with the same --model_dir resumes from
its latest checkpoint. TensorBoard logs: MODEL_DIR/train and MODEL_DIR/eval.

Evaluate a run's latest checkpoint: --mode=eval reads the run's settings from
MODEL_DIR/params.yaml, so only what the evaluation changes is given:

  python tools/train.py --experiment=glue_mrpc --mode=eval --model_dir=runs/mrpc \\
    --params_override=eval_data.input_path=glue/MRPC/dev.tsv

Check a run on accelerators before they are lent: --compile_for compiles the JAX step
this experiment would run there, on this CPU, and reports memory per device, the largest
global batch that fits, FLOPs, collectives and an estimated step time (docs/distributed-and-cloud.md):

  python tools/train.py --experiment=pretraining_bert_tiny --compile_for=tpu:v5e-8 \\
    --mixed_precision_dtype=mixed_bfloat16

`pip install .` installs this tool as the command `bert-tf-train` (same flags).
"""


from absl import app
from absl import flags

from bert_tf import cpu_kernels

# Before TensorFlow loads: it reads its CPU kernels, device kinds and log level once,
# when imported.
cpu_kernels.prefer_onednn()
cpu_kernels.leave_out_absent_gpus()
cpu_kernels.quiet_startup_logs()

from bert_tf import configs
from bert_tf.training import backends
from bert_tf.training import params_file
from bert_tf.utils import errors

_EXPERIMENT = flags.DEFINE_string(
    "experiment", None, "A registered experiment (file stem in "
    "official_configs/experiments/, e.g. pretraining_bert_tiny) or a YAML path.")
_CONFIG_FILE = flags.DEFINE_multi_string(
    "config_file", [], "YAML config file(s), merged in order after --experiment.")
_PARAMS_OVERRIDE = flags.DEFINE_string(
    "params_override", None, "Comma-separated dotted overrides, e.g. "
    "'trainer.train_steps=1000,train_data.global_batch_size=64'.")
_MODEL_DIR = flags.DEFINE_string("model_dir", None, "Checkpoints, params.yaml, TensorBoard.")
_MODE = flags.DEFINE_enum("mode", "train", ["train", "eval", "train_and_eval"],
                          "eval evaluates the latest checkpoint in --model_dir with the "
                          "run's settings from MODEL_DIR/params.yaml (merged after "
                          "--experiment, before --config_file and --params_override): "
                          "give only what evaluation changes, e.g. eval_data.input_path.")
_BACKEND = flags.DEFINE_enum(
    "backend", None, [b for b in configs.BACKENDS if b],
    "Shorthand for runtime.backend: the Keras backend that trains (default: "
    "KERAS_BACKEND, else tensorflow).")
_STRATEGY = flags.DEFINE_enum(
    "distribution_strategy", None, list(configs.STRATEGIES),
    "Shorthand for runtime.distribution_strategy.")
_TPU = flags.DEFINE_string("tpu", None, "Shorthand for runtime.tpu (TPU name or address).")
_NUM_GPUS = flags.DEFINE_integer("num_gpus", None, "Shorthand for runtime.num_gpus.")
_PRECISION = flags.DEFINE_enum(
    "mixed_precision_dtype", None, list(configs.PRECISIONS),
    "Shorthand for runtime.mixed_precision_dtype.")
_JIT = flags.DEFINE_bool("jit_compile", None, "Shorthand for runtime.jit_compile (XLA).")
_INIT = flags.DEFINE_string("init_checkpoint", None,
                            "Shorthand for task.init_checkpoint (warm-start the encoder).")
_VALIDATE = flags.DEFINE_bool(
    "validate_inputs", None, "Shorthand for train_data.validate_inputs: check every "
    "record's checksums before training.")
_COMPILE_FOR = flags.DEFINE_string(
    "compile_for", None, "Compile the JAX training step this experiment would run on an "
    "accelerator target, without it, and report memory per device, the largest global "
    "batch that fits, FLOPs, collectives, kernels and an estimated step time; trains "
    "nothing, needs no --model_dir. Targets: tpu:v5e-16, tpu:v5p-64, tpu:v4-32, "
    "tpu:2xv5e-256 (two slices), gpu:8xH100, gpu:2x8xA100, gpu:H200 "
    "(bert_tf.training.jax_engine.targets; TPUs need libtpu, GPUs JAX's CUDA plugin).")
_MAX_BATCH_COMPILES = flags.DEFINE_integer(
    "max_batch_compiles", 4, "With --compile_for: compiles at most this many more global "
    "batch sizes to find the largest that fits (0: none).")
_REPLACE_PARAMS = flags.DEFINE_bool(
    "replace_params", False, "Replace a MODEL_DIR/params.yaml whose model or data shapes "
    "differ from this configuration (otherwise an error naming the differing entries).")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  if _COMPILE_FOR.value:
    compile_for_target()
    return
  if not _MODEL_DIR.value:
    raise app.UsageError("--model_dir is required")
  config_files = _CONFIG_FILE.value
  if _MODE.value == "eval":
    config_files = params_file.evaluation_config_files(_MODEL_DIR.value, config_files)
  # Before anything imports Keras, which fixes its backend when it loads.
  backend = backends.select(backends.requested_backend(
      _EXPERIMENT.value, config_files, _PARAMS_OVERRIDE.value, _BACKEND.value))
  if backend == "tensorflow":
    # Loaded now, quietly: its libraries write to stderr before its logging is set up.
    # The JAX engine runs without it (a JAX host need not have it).
    cpu_kernels.import_tensorflow_quietly()
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  from bert_tf.training import trainer  # pylint: disable=g-import-not-at-top
  shorthands = experiments.runtime_overrides(
      backend=_BACKEND.value, distribution_strategy=_STRATEGY.value, tpu=_TPU.value,
      num_gpus=_NUM_GPUS.value, mixed_precision_dtype=_PRECISION.value, jit_compile=_JIT.value,
      init_checkpoint=_INIT.value, validate_inputs=_VALIDATE.value)
  config = experiments.resolve_experiment(_EXPERIMENT.value, config_files,
                                          _PARAMS_OVERRIDE.value, shorthands)
  results = trainer.run_experiment(config, _MODEL_DIR.value, _MODE.value,
                                   log_fn=lambda line: print(line, flush=True),
                                   replace_params=_REPLACE_PARAMS.value)
  shown = ", ".join(f"{k} {v:.4f}" for k, v in sorted(results.items()))
  print(f"Done ({_MODE.value}): {shown}. Checkpoints and params.yaml in {_MODEL_DIR.value}; "
        f"TensorBoard: tensorboard --logdir {_MODEL_DIR.value}", flush=True)


def compile_for_target():
  """--compile_for: the experiment's JAX step compiled for a target (no training)."""
  if _BACKEND.value not in (None, "jax"):
    raise app.UsageError("--compile_for compiles the JAX engine's step: leave out --backend "
                         "or pass --backend=jax")
  backends.select("jax")
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  from bert_tf.training.jax_engine import compile_for  # pylint: disable=g-import-not-at-top
  shorthands = experiments.runtime_overrides(
      backend="jax", distribution_strategy=_STRATEGY.value,
      mixed_precision_dtype=_PRECISION.value)
  config = experiments.resolve_experiment(_EXPERIMENT.value, _CONFIG_FILE.value,
                                          _PARAMS_OVERRIDE.value, shorthands)
  compile_for.compile_for(config, _COMPILE_FOR.value, lambda line: print(line, flush=True),
                          max_batch_compiles=_MAX_BATCH_COMPILES.value)


def run():
  """The `bert-tf-train` command."""
  errors.run_tool("train", main)


if __name__ == "__main__":
  run()
