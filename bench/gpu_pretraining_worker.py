"""The worker of bench/gpu_pretraining.py: one process times one thing, then prints one
`RESULT {json}` line on stdout.

  --side=matmul_jax, matmul_torch   the device's dense matmul rate (FLOP/s) in jax or
                                    torch, the denominator of the MFU column
  --side=ours                       bert_tf's JAX training step
                                    (bert_tf.training.jax_engine.step over BertPretrainer)
  --side=hf_eager, hf_compile       Hugging Face BertForPreTraining in torch, eager or
                                    under torch.compile (bench/gpu_pretraining_hf.py)

The driver starts one worker per configuration, so that jax and torch never hold the
accelerator's memory at once and a failed compile loses one figure, not the run.
Nothing here imports TensorFlow (the GPU machines have none): at import this module
needs only the standard library and numpy; each side imports its own framework.

Both training sides build from one bert_tf ExperimentConfig: the --size's encoder, the
optimizer's defaults, the --precision as runtime.mixed_precision_dtype, then each
--override (`model.encoder.dropout_rate=0`, `runtime.float8_training=true`, ...).
Hugging Face's step reads its model.encoder and optimizer sections; ours reads those
and the runtime section (its speed path, bert_tf.kernels.for_runtime, and float8).

Timing: the first step (tracing, compilation, autotuning, allocation) is timed apart,
then --warmup_steps more run untimed. Synced: each of --steps steps is waited for
(jax: block_until_ready; torch: cuda.synchronize) before its clock stops, so each step
has its own time and the spread comes from them. Back to back: --steps steps are
dispatched one after the other and waited for once, as a training loop runs them,
in --back_to_back_rounds rounds; a round's time / --steps is its step time. With
--profile_dir, --profile_steps more steps run back to back under the framework's
profiler, and the result carries their device time by category and largest kernels
(bench/kernel_profile.py).
"""

import argparse
import json
import math
import os
import sys
import time
from typing import Optional


from bench import gpu_devices
from bench import kernel_profile
from bench import matmul_peak
from bench.peers import protocol

# The start of the line that carries a worker's result.
RESULT = "RESULT "
SIDES = ("matmul_jax", "matmul_torch", "ours", "hf_eager", "hf_compile")
# Both sides take the optimizer's settings from the experiment's optimizer section
# (by default those of the original BERT: AdamW at 1e-4 after 10,000 warm-up steps,
# decay 0.01, clipping at 1.0); the linear decay ends at the original's last step.
DECAY_STEPS = 1_000_000
POLICIES = {"bf16": "mixed_bfloat16", "float32": "float32"}
# --precision -> the dtype of the matmul-rate products (bench/matmul_peak.py).
POLICY_DTYPES = {"bf16": "bfloat16", "float32": "float32"}


def argument_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--side", required=True, choices=SIDES)
  parser.add_argument("--size", default="tiny", help="A size of bert_tf.configs "
                      "(tiny, mini, small, medium, base, large).")
  parser.add_argument("--batch_size", type=int, default=8)
  parser.add_argument("--seq_length", type=int, default=128)
  parser.add_argument("--predictions", type=int, default=20,
                      help="Masked positions per sequence.")
  parser.add_argument("--steps", type=int, default=10, help="Timed steps.")
  parser.add_argument("--warmup_steps", type=int, default=3,
                      help="Untimed steps after the first one.")
  parser.add_argument("--precision", default="bf16", choices=("bf16", "float32"),
                      help="bf16: Keras mixed_bfloat16 / torch bf16 autocast / bf16 "
                      "matmuls; float32: everything in float32.")
  parser.add_argument("--device", default="any", choices=("any", "gpu", "cpu"),
                      help="gpu: fail unless jax and torch see a CUDA GPU; cpu: hide any "
                      "GPU; any: a GPU when there is one.")
  parser.add_argument("--hf_mlm", default="gathered", choices=("gathered", "all"),
                      help="gathered: the masked-LM head of BertForPreTraining at the "
                      "masked positions only, as ours; all: the stock forward with "
                      "labels, which runs the head at every position.")
  parser.add_argument("--override", action="append", default=[],
                      help="A dotted bert_tf config override, key.sub=value (repeatable): "
                      "model.encoder.* and optimizer.* for both sides, runtime.* for "
                      "ours.")
  parser.add_argument("--back_to_back_rounds", type=int, default=3,
                      help="Rounds of --steps steps dispatched back to back.")
  parser.add_argument("--profile_dir", default="",
                      help="Profile --profile_steps more steps, writing the trace here.")
  parser.add_argument("--profile_steps", type=int, default=3)
  parser.add_argument("--matmul_shapes", default="8192x8192x8192",
                      help="Comma-separated MxKxN shapes of the matmul sides.")
  parser.add_argument("--matmul_seconds", type=float, default=0.2,
                      help="Each matmul round repeats the product for about this long.")
  parser.add_argument("--matmul_rounds", type=int, default=5)
  return parser


def parse_shapes(text: str):
  """'8192x1024x4096,...' -> [(8192, 1024, 4096), ...]."""
  return [tuple(int(d) for d in shape.split("x")) for shape in text.split(",") if shape]


def tensorflow_loaded() -> bool:
  """Whether TensorFlow got imported into this process (a blocked import leaves None)."""
  return sys.modules.get("tensorflow") is not None


def print_result(result: dict) -> None:
  """Prints `result`, with tensorflow_loaded, as the worker's one `RESULT {json}` line."""
  sys.stdout.write(RESULT + json.dumps(dict(result, tensorflow_loaded=tensorflow_loaded()))
                   + "\n")
  sys.stdout.flush()


def read_result(stdout: str) -> Optional[dict]:
  """The dict of the last `RESULT {json}` line of a worker's stdout; None without one."""
  lines = [line for line in stdout.splitlines() if line.startswith(RESULT)]
  return json.loads(lines[-1][len(RESULT):]) if lines else None


def time_steps(step, sync, warmup_steps: int, steps: int):
  """Runs `step` 1 + warmup_steps + steps times, each followed by `sync()`.

  Args:
    step: callable running one training step; returns the loss (any scalar that
      float() reads).
    sync: callable that waits for the device's pending work.

  Returns:
    dict: first_step_s (the first step alone: compilation and allocation),
    step_seconds (a list, one per timed step), loss_first, loss_last.
  """
  start = time.perf_counter()
  loss_first = float(step())
  sync()
  first = time.perf_counter() - start
  for _ in range(warmup_steps):
    step()
  sync()
  seconds, loss = [], loss_first
  for _ in range(steps):
    start = time.perf_counter()
    loss = step()
    sync()
    seconds.append(time.perf_counter() - start)
  return {"first_step_s": first, "step_seconds": seconds, "loss_first": loss_first,
          "loss_last": float(loss)}


def back_to_back(step, sync, steps: int, rounds: int) -> list:
  """Seconds per step of `rounds` rounds, each `steps` calls of `step` followed by one
  `sync()`."""
  seconds = []
  for _ in range(rounds):
    start = time.perf_counter()
    for _ in range(steps):
      step()
    sync()
    seconds.append((time.perf_counter() - start) / steps)
  return seconds


# --------------------------------------------------------------------------------------
# The matmul rate (bench/matmul_peak.py's products, on this worker's device).

def matmul_rate(args, framework: str, device_name: str, torch_device=None) -> dict:
  """bf16 (or float32) [M, K] x [K, N] products of each --matmul_shapes in `framework`:
  the fastest rate over shapes (each shape's fastest round) and every shape's figures."""
  per_shape = {}
  for shape in parse_shapes(args.matmul_shapes):
    one = matmul_peak.product(framework, POLICY_DTYPES[args.precision], shape,
                              torch_device=torch_device)
    per_shape["x".join(map(str, shape))] = matmul_peak.measure(
        one, args.matmul_seconds, args.matmul_rounds)
  return {"framework": one.framework, "device": device_name,
          "flops_per_second": max(r["peak_flops_per_second"] for r in per_shape.values()),
          "per_shape": per_shape}


def matmul_jax(args) -> dict:
  import jax  # pylint: disable=g-import-not-at-top
  return matmul_rate(args, "jax", gpu_devices.jax_device_name(jax))


def matmul_torch(args) -> dict:
  import torch  # pylint: disable=g-import-not-at-top
  device, _ = gpu_devices.torch_device(torch, args.device)
  return matmul_rate(args, "torch", gpu_devices.torch_device_name(torch), device)


# --------------------------------------------------------------------------------------
# bert_tf on JAX.

def experiment_of(args):
  """The bert_tf ExperimentConfig both training sides build from (module docstring).

  Raises:
    ConfigError: an override that is no config field, or one of
      runtime.mixed_precision_dtype (set by --precision).
  """
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  base = configs.ExperimentConfig().override({
      "model": {"encoder": {"size": args.size}},
      "runtime": {"backend": "jax", "mixed_precision_dtype": POLICIES[args.precision]}})
  experiment = base.override(args.override)
  if experiment.runtime.mixed_precision_dtype != base.runtime.mixed_precision_dtype:
    raise configs.ConfigError("runtime.mixed_precision_dtype is --precision's")
  return experiment


def pretrainer(experiment, kernels=None):
  """BertPretrainer over BertEncoder for `experiment`'s encoder in its runtime's dtype
  policy, its layers computing `kernels`' way (None: the reference layers), float8
  projections with runtime.float8_training."""
  import keras  # pylint: disable=g-import-not-at-top
  from bert_tf.models import BertEncoder, BertPretrainer, float8  # pylint: disable=g-import-not-at-top
  model = BertPretrainer(BertEncoder.from_config_object(
      experiment.model.encoder,
      dtype=keras.DTypePolicy(experiment.runtime.mixed_precision_dtype), kernels=kernels))
  if experiment.runtime.float8_training:
    float8.enable(model)
  return model


def jax_train_step(model, experiment):
  """(step, state): `model`'s training step as the JAX trainer compiles it for
  pretraining (bert_tf.losses.pretraining_loss, the project's AdamW from the
  experiment's optimizer section with its schedule over DECAY_STEPS, weight-decay
  exclusions by variable path and global-norm clipping; bert_tf.training.jax_engine.step,
  state donated) and the initial TrainState (on the default device)."""
  from bert_tf import constants  # pylint: disable=g-import-not-at-top
  from bert_tf import losses  # pylint: disable=g-import-not-at-top
  from bert_tf.training.jax_engine import step as jax_step  # pylint: disable=g-import-not-at-top
  from bert_tf.training.jax_engine import optimizer as stateless_optimizer  # pylint: disable=g-import-not-at-top
  optimizer = stateless_optimizer.build_stateless_optimizer(
      experiment.optimizer, DECAY_STEPS, model.trainable_variables)
  input_names = (*constants.ENCODER_INPUTS, constants.MASKED_LM_POSITIONS)
  step_fn = jax_step.make_train_step(
      model, optimizer, lambda batch, outputs, _: losses.pretraining_loss(batch, outputs),
      inputs_fn=lambda batch: {name: batch[name] for name in input_names})
  return step_fn, jax_step.state_from(model, optimizer)


def ours_step(args, experiment) -> gpu_devices.Side:
  """bert_tf's JAX training step, as the JAX trainer builds it for pretraining:
  `pretrainer` with the runtime's speed path (bert_tf.kernels.for_runtime: the JAX GPU
  kernels on a GPU) and `jax_train_step`."""
  os.environ["KERAS_BACKEND"] = "jax"
  import jax  # pylint: disable=g-import-not-at-top
  import keras  # pylint: disable=g-import-not-at-top
  from bert_tf import kernels  # pylint: disable=g-import-not-at-top
  from bert_tf.training.jax_engine import step as jax_step  # pylint: disable=g-import-not-at-top
  model = pretrainer(experiment, kernels.for_runtime(experiment.runtime))
  step_fn, initial = jax_train_step(model, experiment)
  state = [initial]
  batch = jax_step.shard_batch(synthetic_batch(args, experiment.model.encoder.vocab_size))

  def step():
    state[0], logs = step_fn(state[0], batch)
    return logs["loss"]

  def peak_memory_mb():
    memory = jax.devices()[0].memory_stats() or {}
    return memory["peak_bytes_in_use"] / 2**20 if "peak_bytes_in_use" in memory else None

  # Float8 scaling state is overwritten, not trained: the params are the weights.
  weights = [v for v in model.trainable_variables
             if not getattr(v, "overwrite_with_gradient", False)]
  return gpu_devices.Side(
      step, lambda: jax.block_until_ready(state[0]),
      {"framework": f"bert_tf on keras {keras.__version__}, jax {jax.__version__}",
       "device": gpu_devices.jax_device_name(jax),
       "params": sum(int(math.prod(v.shape)) for v in weights)},
      peak_memory_mb, kernel_profile.capture_jax)


def synthetic_batch(args, vocab_size: int) -> dict:
  """The random batch every side trains on (bench/peers/protocol.py): full-length rows,
  --predictions sorted masked positions each; numpy int32/float32 arrays."""
  return protocol.pretraining_batch(args.batch_size, args.seq_length, args.predictions,
                                    vocab_size=vocab_size)


# --------------------------------------------------------------------------------------

def train_side(args) -> dict:
  """Builds --side's training step, times it synced and back to back, and profiles it
  with --profile_dir."""
  experiment = experiment_of(args)
  batch = synthetic_batch(args, experiment.model.encoder.vocab_size)
  if args.side == "ours":
    side = ours_step(args, experiment)
  else:
    from bench import gpu_pretraining_hf  # pylint: disable=g-import-not-at-top
    side = gpu_pretraining_hf.hf_step(args, experiment, batch, DECAY_STEPS,
                                      compiled=args.side == "hf_compile")
  result = time_steps(side.step, side.sync, args.warmup_steps, args.steps)
  result["back_to_back_step_seconds"] = back_to_back(side.step, side.sync, args.steps,
                                                     args.back_to_back_rounds)
  result.update(side.info, peak_memory_mb=side.peak_memory_mb(),
                xla_flags=os.environ.get("XLA_FLAGS", ""))
  if args.profile_dir:
    path, seconds = side.capture(side.step, side.sync, args.profile_steps,
                                 args.profile_dir)
    result["profile"] = dict(kernel_profile.summarize(kernel_profile.read_trace(path),
                                                      args.profile_steps),
                             trace=path, wall_ms_per_step=1e3 * seconds)
  return result


def main(argv=None) -> None:
  args = argument_parser().parse_args(argv)
  if args.side == "ours":
    # The JAX engine's XLA settings (command buffers off), before JAX starts; a
    # variant's own XLA_FLAGS entry wins.
    from bert_tf.kernels.jax_gpu import xla_flags  # pylint: disable=g-import-not-at-top
    xla_flags.apply_jax_defaults()
  gpu_devices.select_device(args.device)
  if args.side == "matmul_jax":
    result = matmul_jax(args)
  elif args.side == "matmul_torch":
    result = matmul_torch(args)
  else:
    result = train_side(args)
  print_result(result)


if __name__ == "__main__":
  main()
