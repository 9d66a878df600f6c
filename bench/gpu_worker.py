"""The workers of the GPU benchmarks: one process times or checks one thing, then prints
one `RESULT {json}` line on stdout. Nothing here imports TensorFlow (the GPU machines
have none): at import this module needs only the standard library and numpy; each side
or check imports its own framework.

Timing sides, for bench/gpu_pretraining.py (`--side=...`):

  matmul_jax, matmul_torch   the device's dense matmul rate (FLOP/s) in jax or torch,
                             the denominator of the MFU column
  ours                       bert_tf's JAX training step
                             (bert_tf.training.jax_engine.step over BertPretrainer)
  hf_eager, hf_compile       Hugging Face BertForPreTraining in torch, eager or under
                             torch.compile (hf_step)

The driver starts one worker per configuration, so that jax and torch never hold the
accelerator's memory at once and a failed compile loses one figure, not the run.

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

Numerics checks, for bench/gpu_trainer.py (`--check=...`, JAX and Keras only), each the
device phase of that name in its docstring: kernels in float32 and bfloat16, dropout on
and off with the same hashed masks; steps against the float32 reference layers on the
CPU from one initialization, dropout off; outputs to --output .npz for --stage=compare;
input, the TensorFlow-free host input's sequences/s on --config's training data.

Where JAX has no GPU (the CPU dry run) the accelerator is the CPU and the Pallas
kernels run in Pallas's interpreter.
"""

import argparse
import logging
import math
import os
import sys
import time
from typing import Callable, Dict, NamedTuple, Optional

import numpy as np

from bench import kernel_profile
from bench import matmul_peak
from bench.peers import protocol

SIDES = ("matmul_jax", "matmul_torch", "ours", "hf_eager", "hf_compile")
# Both sides take the optimizer's settings from the experiment's optimizer section
# (by default those of the original BERT: AdamW at 1e-4 after 10,000 warm-up steps,
# decay 0.01, clipping at 1.0); the linear decay ends at the original's last step.
DECAY_STEPS = 1_000_000
POLICIES = {"bf16": "mixed_bfloat16", "float32": "float32"}
# --precision -> the dtype of the matmul-rate products (bench/matmul_peak.py).
POLICY_DTYPES = {"bf16": "bfloat16", "float32": "float32"}
CHECKS = ("kernels", "steps", "outputs", "input")
# Largest difference from the XLA form, over the largest magnitude of the XLA form's
# tensor: float32 allows the TF32 products GPUs use by default, bfloat16 its rounding
# (tests/kernels/jax_gpu use 1e-5 and 2% in Pallas's interpreter).
KERNEL_TOLERANCE = {"float32": 2e-3, "bfloat16": 2e-2}
# Largest |loss difference| / loss over the steps against the float32 CPU run.
STEP_TOLERANCE = {"float32": 1e-3, "bfloat16": 2e-2}


def argument_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  what = parser.add_mutually_exclusive_group(required=True)
  what.add_argument("--side", choices=SIDES, help="What to time.")
  what.add_argument("--check", choices=CHECKS, help="What to check.")
  parser.add_argument("--size", default="tiny", help="A size of bert_tf.configs "
                      "(tiny, mini, small, medium, base, large).")
  parser.add_argument("--batch_size", type=int, default=8)
  parser.add_argument("--seq_length", type=int, default=128)
  parser.add_argument("--predictions", type=int, default=20,
                      help="Masked positions per sequence.")
  parser.add_argument("--steps", type=int, default=10, help="Timed steps; the steps "
                      "check's training steps; the input check's batches.")
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
  parser.add_argument("--heads", type=int, default=12, help="kernels: attention heads.")
  parser.add_argument("--hidden", type=int, default=768,
                      help="kernels: the LayerNorm's width (heads x 64 for attention).")
  parser.add_argument("--checkpoint", default="", help="outputs: a trainer checkpoint.")
  parser.add_argument("--config", default="", help="outputs, input: the experiment YAML "
                      "(a model_dir's params.yaml).")
  parser.add_argument("--output", default="", help="outputs: the .npz to write.")
  return parser


def parse_shapes(text: str):
  """'8192x1024x4096,...' -> [(8192, 1024, 4096), ...]."""
  return [tuple(int(d) for d in shape.split("x")) for shape in text.split(",") if shape]


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


# The devices, and the step each side hands to the timing.

class Side(NamedTuple):
  """One side's training step, ready to time.

  step: runs one training step, returns its loss (a device scalar; not synchronized).
  sync: waits for the device's pending work.
  info: framework, device and params (the trained weights, not float8 scaling state).
  peak_memory_mb: the device's peak memory so far, or None where unknown.
  capture: (step, sync, steps, directory) -> (trace path, wall seconds per step): runs
    steps back to back under the framework's profiler (bench/kernel_profile.py).
  """

  step: Callable
  sync: Callable
  info: Dict
  peak_memory_mb: Callable[[], Optional[float]]
  capture: Callable


def select_device(device: str) -> None:
  """Points jax and torch at the --device asked for, before either is imported."""
  if device == "cpu":
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
  elif device == "gpu":
    os.environ["JAX_PLATFORMS"] = "cuda"  # jax raises when it finds no CUDA device.


def jax_device_name(jax) -> str:
  device = jax.devices()[0]
  if device.platform == "cpu":
    return f"{matmul_peak.machine_description()} (cpu)"
  return f"{device.device_kind} ({device.platform})"


def torch_device(torch, wanted: str):
  """("cuda" or "cpu", a function that waits for the device); `wanted` is --device."""
  if torch.cuda.is_available():
    return "cuda", torch.cuda.synchronize
  if wanted == "gpu":
    raise RuntimeError("--device=gpu: torch sees no CUDA device")
  return "cpu", lambda: None


def torch_device_name(torch) -> str:
  if torch.cuda.is_available():
    return f"{torch.cuda.get_device_name()} (cuda)"
  return f"{matmul_peak.machine_description()} (cpu)"


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
  return matmul_rate(args, "jax", jax_device_name(jax))


def matmul_torch(args) -> dict:
  import torch  # pylint: disable=g-import-not-at-top
  device, _ = torch_device(torch, args.device)
  return matmul_rate(args, "torch", torch_device_name(torch), device)


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


def ours_step(args, experiment) -> Side:
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
  return Side(
      step, lambda: jax.block_until_ready(state[0]),
      {"framework": f"bert_tf on keras {keras.__version__}, jax {jax.__version__}",
       "device": jax_device_name(jax),
       "params": sum(int(math.prod(v.shape)) for v in weights)},
      peak_memory_mb, kernel_profile.capture_jax)


def synthetic_batch(args, vocab_size: int) -> dict:
  """The random batch every side trains on (bench/peers/protocol.py): full-length rows,
  --predictions sorted masked positions each; numpy int32/float32 arrays."""
  return protocol.pretraining_batch(args.batch_size, args.seq_length, args.predictions,
                                    vocab_size=vocab_size)


# Hugging Face BertForPreTraining in torch, eager or under torch.compile: the peer of
# bert_tf's JAX step. The same model as ours (the experiment's encoder section: sizes,
# dropout, activation, initializer range), SDPA attention, bf16 autocast, fused
# torch.optim.AdamW with the experiment's optimizer settings (no decay on biases and
# LayerNorm), global-norm clipping and the linear warm-up/decay schedule.

def hf_step(args, experiment, batch, decay_steps: int, compiled: bool) -> Side:
  """Builds Hugging Face's step.

  Args:
    args: the worker's arguments (device, precision, hf_mlm).
    experiment: a bert_tf.configs.ExperimentConfig; its model.encoder and optimizer.
    batch: the synthetic batch, {name: numpy array} (bench/peers/protocol.py).
    decay_steps: where the linear decay ends.
    compiled: the forward and loss under torch.compile (its backward compiled with it).
  """
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  device, sync = torch_device(torch, args.device)
  torch.manual_seed(0)
  config = experiment.model.encoder
  settings = experiment.optimizer
  model = transformers.BertForPreTraining(transformers.BertConfig(
      vocab_size=config.vocab_size, hidden_size=config.hidden_size,
      num_hidden_layers=config.num_layers, num_attention_heads=config.num_attention_heads,
      intermediate_size=config.intermediate_size, hidden_act=config.hidden_activation,
      hidden_dropout_prob=config.dropout_rate,
      attention_probs_dropout_prob=config.attention_dropout_rate,
      max_position_embeddings=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size, initializer_range=config.initializer_range,
      layer_norm_eps=config.layer_norm_epsilon, attn_implementation="sdpa")).to(device)
  model.train()
  decay, no_decay = [], []
  for name, param in model.named_parameters():
    excluded = any(p in name for p in settings.exclude_from_weight_decay)
    (no_decay if excluded else decay).append(param)
  optimizer = torch.optim.AdamW(
      [{"params": decay, "weight_decay": settings.weight_decay_rate},
       {"params": no_decay, "weight_decay": 0.0}], lr=settings.learning_rate,
      betas=(settings.beta_1, settings.beta_2), eps=settings.epsilon, fused=True)
  schedule = transformers.get_linear_schedule_with_warmup(
      optimizer, settings.warmup_steps, decay_steps)

  batch = {name: torch.from_numpy(value).long().to(device) for name, value in batch.items()}
  weights = batch["masked_lm_weights"].float()
  # The stock forward's labels: the original ids at the masked positions, -100 elsewhere.
  labels = torch.full_like(batch["input_word_ids"], -100).scatter_(
      1, batch["masked_lm_positions"], batch["masked_lm_ids"])
  bf16 = args.precision == "bf16"

  def forward_loss():
    with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
      if args.hf_mlm == "all":
        return model(input_ids=batch["input_word_ids"], attention_mask=batch["input_mask"],
                     token_type_ids=batch["input_type_ids"], labels=labels,
                     next_sentence_label=batch["next_sentence_labels"]).loss
      sequence, pooled = model.bert(input_ids=batch["input_word_ids"],
                                    attention_mask=batch["input_mask"],
                                    token_type_ids=batch["input_type_ids"],
                                    return_dict=False)[:2]
      positions = batch["masked_lm_positions"]
      gathered = torch.gather(sequence, 1,
                              positions[:, :, None].expand(-1, -1, sequence.shape[-1]))
      mlm_logits = model.cls.predictions(gathered).float()
      nsp_logits = model.cls.seq_relationship(pooled).float()
    per_position = torch.nn.functional.cross_entropy(
        mlm_logits.flatten(0, 1), batch["masked_lm_ids"].flatten(), reduction="none")
    mlm = (per_position * weights.flatten()).sum() / (weights.sum() + 1e-5)
    return mlm + torch.nn.functional.cross_entropy(nsp_logits,
                                                   batch["next_sentence_labels"])

  loss_fn = torch.compile(forward_loss) if compiled else forward_loss

  def step():
    loss = loss_fn()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), settings.global_clipnorm)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()

  cuda = device == "cuda"
  if cuda:
    torch.cuda.reset_peak_memory_stats()
  return Side(
      step, sync,
      {"framework": f"transformers {transformers.__version__}, torch {torch.__version__}",
       "device": torch_device_name(torch),
       "params": sum(p.numel() for p in model.parameters())},
      lambda: torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
      lambda *a: kernel_profile.capture_torch(*a, cuda=cuda))


def train_side(args) -> dict:
  """Builds --side's training step, times it synced and back to back, and profiles it
  with --profile_dir."""
  experiment = experiment_of(args)
  batch = synthetic_batch(args, experiment.model.encoder.vocab_size)
  if args.side == "ours":
    side = ours_step(args, experiment)
  else:
    side = hf_step(args, experiment, batch, DECAY_STEPS, compiled=args.side == "hf_compile")
  result = time_steps(side.step, side.sync, args.warmup_steps, args.steps)
  result["back_to_back_step_seconds"] = [
      kernel_profile.back_to_back_seconds(side.step, side.sync, args.steps)
      for _ in range(args.back_to_back_rounds)]
  result.update(side.info, peak_memory_mb=side.peak_memory_mb(),
                xla_flags=os.environ.get("XLA_FLAGS", ""))
  if args.profile_dir:
    path, seconds = side.capture(side.step, side.sync, args.profile_steps,
                                 args.profile_dir)
    result["profile"] = dict(kernel_profile.summarize(kernel_profile.read_trace(path),
                                                      args.profile_steps),
                             trace=path, wall_ms_per_step=1e3 * seconds)
  return result


# The numerics checks of bench/gpu_trainer.py.

def _accelerator_kernels(**settings):
  """The JAX GPU speed path on a GPU; on a CPU the same code in Pallas's interpreter."""
  import jax  # pylint: disable=g-import-not-at-top
  from bert_tf.kernels.jax_gpu import hooks  # pylint: disable=g-import-not-at-top
  return hooks.JaxGpuKernels(interpret=jax.default_backend() != "gpu", **settings)


def relative_errors(values, references) -> list:
  """max |a - b| / max |b| of each pair, as floats."""
  out = []
  for a, b in zip(values, references):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    out.append(float(np.abs(a - b).max() / max(float(np.abs(b).max()), 1e-30)))
  return out


def _value_and_grads(fn, args, d_out):
  """fn(*args)'s value and the gradients of sum(fn(*args) * d_out) for every arg."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  def loss(*xs):
    out = fn(*xs)
    return jnp.sum(out.astype(jnp.float32) * d_out), out

  (_, out), grads = jax.jit(jax.value_and_grad(
      loss, argnums=tuple(range(len(args))), has_aux=True))(*args)
  return [out, *grads]


def _compare(name, fused, plain, dtype, names) -> dict:
  errors = dict(zip(names, relative_errors(fused, plain)))
  worst = max(errors.values())
  return {"name": name, "dtype": dtype, "max_relative_error": worst, "errors": errors,
          "tolerance": KERNEL_TOLERANCE[dtype], "ok": worst <= KERNEL_TOLERANCE[dtype]}


def attention_cases(args, interpret: bool) -> list:
  """The Pallas attention against xla_attention at [B, T, heads, 64] (every row but the
  first padded in its last quarter), in float32 and bfloat16, dropout 0 and 0.1."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from bert_tf.kernels.jax_gpu import attention  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  shape = (args.batch_size, args.seq_length, args.heads, 64)
  bias = np.zeros((shape[0], 1, 1, shape[1]), np.float32)
  bias[1:, ..., shape[1] * 3 // 4:] = -10000.0
  seed = jnp.asarray([1234, 5], jnp.uint32)
  d_out = jnp.asarray(rng.normal(size=shape), jnp.float32)
  cases = []
  for dtype in ("float32", "bfloat16"):
    qkv = [jnp.asarray(rng.normal(size=shape), dtype) for _ in range(3)]
    for rate in (0.0, 0.1):
      def fused_fn(q, k, v, rate=rate):
        return attention.flash_attention(q, k, v, bias, rate, seed, interpret=interpret)

      def plain_fn(q, k, v, rate=rate):
        return attention.xla_attention(q, k, v, bias, rate, seed)

      fused = _value_and_grads(fused_fn, qkv, d_out)
      plain = _value_and_grads(plain_fn, qkv, d_out)
      cases.append(_compare(f"attention {shape} dropout {rate}", fused, plain, dtype,
                            ["out", "d_query", "d_key", "d_value"]))
  return cases


def layer_norm_cases(args, interpret: bool) -> list:
  """The Pallas residual LayerNorm against xla_residual_layer_norm over [B x T, hidden]
  rows, in float32 and bfloat16, dropout 0 and 0.1."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from bert_tf.kernels.jax_gpu import layer_norm  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(1)
  rows = (args.batch_size * args.seq_length, args.hidden)
  seed = jnp.asarray([99, 7], jnp.uint32)
  d_out = jnp.asarray(rng.normal(size=rows), jnp.float32)
  gamma = jnp.asarray(1 + 0.1 * rng.normal(size=rows[1:]), jnp.float32)
  beta = jnp.asarray(0.1 * rng.normal(size=rows[1:]), jnp.float32)
  cases = []
  for dtype in ("float32", "bfloat16"):
    x, residual = (jnp.asarray(rng.normal(size=rows), dtype) for _ in range(2))
    bias = jnp.asarray(0.1 * rng.normal(size=rows[1:]), dtype)
    for rate in (0.0, 0.1):
      def fused_fn(x, b, r, g, be, rate=rate):
        return layer_norm.residual_layer_norm(x, b, r, g, be, 1e-12, rate, seed,
                                              interpret=interpret)

      def plain_fn(x, b, r, g, be, rate=rate):
        return layer_norm.xla_residual_layer_norm(x, b, r, g, be, 1e-12, rate, seed)

      args_ = [x, bias, residual, gamma, beta]
      cases.append(_compare(f"residual layer norm {rows} dropout {rate}",
                            _value_and_grads(fused_fn, args_, d_out),
                            _value_and_grads(plain_fn, args_, d_out), dtype,
                            ["out", "d_x", "d_bias", "d_residual", "d_gamma", "d_beta"]))
  return cases


def auto_attention() -> dict:
  """attention=auto on this device, then with the kernel made to fail to compile and to
  disagree (each must fall back to XLA ops), and the hook on a shape the kernel does not
  take (it must compute xla_attention's result)."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from bert_tf.kernels.jax_gpu import attention  # pylint: disable=g-import-not-at-top
  from bert_tf.kernels.jax_gpu import hooks  # pylint: disable=g-import-not-at-top
  on_gpu = jax.default_backend() == "gpu"
  out = {"on_gpu": on_gpu, "kernel_works": hooks.pallas_attention_works(),
         "auto_picks": hooks.JaxGpuKernels(attention="auto").attention_implementation}
  original = attention.flash_attention

  def failing(*args, **kwargs):
    raise RuntimeError("compilation failed (made to fail by bench/gpu_worker.py)")

  def disagreeing(*args, **kwargs):
    # Off GPUs in Pallas's interpreter, so that the comparison itself is reached.
    return original(*args, interpret=not on_gpu, **kwargs) * 1.5

  for name, replacement in (("when_it_fails", failing), ("when_it_disagrees", disagreeing)):
    attention.flash_attention = replacement
    hooks.pallas_attention_works.cache_clear()
    try:
      works = hooks.pallas_attention_works()
      picks = (hooks.JaxGpuKernels(attention="auto").attention_implementation
               if on_gpu else "xla (auto picks XLA off GPUs)")
    finally:
      attention.flash_attention = original
      hooks.pallas_attention_works.cache_clear()
    out[name] = {"kernel_works": works, "auto_picks": picks, "ok": not works}
  # T = 100 is no multiple of 16: the hook computes the XLA form whatever it was given.
  rng = np.random.default_rng(2)
  q, k, v = (jnp.asarray(rng.normal(size=(2, 100, 2, 64)), jnp.float32) for _ in range(3))
  bias = jnp.zeros((2, 1, 1, 100), jnp.float32)
  dropout = type("NoDropout", (), {"rate": 0.0})()
  kernels = _accelerator_kernels(attention="pallas")
  hooked = kernels.attention(q, k, v, bias, dropout, training=False)
  plain = attention.xla_attention(q, k, v, bias)
  error = relative_errors([hooked], [jnp.reshape(plain, hooked.shape)])[0]
  out["unsupported_shape"] = {"flash_supported": attention.flash_supported(q, k, bias),
                              "max_relative_error": error, "ok": error <= 1e-6}
  return out


def check_kernels(args) -> dict:
  import jax  # pylint: disable=g-import-not-at-top
  interpret = jax.default_backend() != "gpu"
  cases = attention_cases(args, interpret) + layer_norm_cases(args, interpret)
  auto = auto_attention()
  ok = all(c["ok"] for c in cases) and all(
      auto[k]["ok"] for k in ("when_it_fails", "when_it_disagrees", "unsupported_shape"))
  return {"interpret": interpret, "cases": cases, "auto_attention": auto, "ok": ok}


def _experiment(args, precision: str):
  """The steps check's experiment: --size, dropout off, AdamW at 1e-4 after 10 warm-up
  steps (so that 100 steps move the weights), global batches of --batch_size,
  `precision`'s dtype policy."""
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  return experiments.experiment_from_yaml(overrides=[
      f"model.encoder.size={args.size}", "model.encoder.dropout_rate=0",
      "model.encoder.attention_dropout_rate=0", "optimizer.warmup_steps=10",
      f"train_data.global_batch_size={args.batch_size}",
      "runtime.backend=jax", f"runtime.mixed_precision_dtype={precision}"])


def _task(experiment, kernels):
  """The trainer's task of `experiment`, its models built with `kernels` (None: the
  reference layers) in place of the runtime's speed path."""
  from bert_tf.tasks import base as task_base  # pylint: disable=g-import-not-at-top
  task = task_base.get_task(experiment)
  task.kernels = kernels  # a cached property: the instance's value is the one used
  return task


def _train_step(task, model):
  """(step, state): the JAX engine's training step over `model`
  (bert_tf.training.jax_engine.engine: `task`'s loss, loss normalizers, model inputs
  and train metrics, the stateless optimizer of the experiment's optimizer section
  over trainer.train_steps) and the initial TrainState (on the default device)."""
  from bert_tf.training import steps  # pylint: disable=g-import-not-at-top
  from bert_tf.training.jax_engine import optimizer as stateless_optimizer  # pylint: disable=g-import-not-at-top
  from bert_tf.training.jax_engine import step as jax_step  # pylint: disable=g-import-not-at-top
  experiment = task.experiment
  optimizer = stateless_optimizer.build_stateless_optimizer(
      experiment.optimizer, experiment.trainer.train_steps, model.trainable_variables,
      experiment.runtime.mixed_precision_dtype, experiment.runtime.loss_scale)

  def loss_fn(batch, outputs, normalizers):
    losses = task.compute_loss(batch, outputs, experiment.train_data.global_batch_size,
                               **normalizers)
    return steps.flat_outputs(losses, task.train_metrics(batch, outputs))

  step_fn = jax_step.make_train_step(model, optimizer, loss_fn,
                                     normalizers_fn=task.loss_normalizers,
                                     inputs_fn=task.model_inputs)
  return step_fn, jax_step.state_from(model, optimizer)


def _losses(task, model, batches, steps: int, device) -> list:
  """The loss of each of `steps` steps of `model` trained on `device` on `batches` in
  turn."""
  import jax  # pylint: disable=g-import-not-at-top
  step_fn, state = _train_step(task, model)
  state = jax.device_put(state, device)
  batches = jax.device_put(batches, device)
  losses = []
  for i in range(steps):
    state, logs = step_fn(state, batches[i % len(batches)])
    losses.append(logs["loss"])
  return [float(loss) for loss in losses]


def check_steps(args) -> dict:
  import jax  # pylint: disable=g-import-not-at-top
  import keras  # pylint: disable=g-import-not-at-top
  from bert_tf.training import trained_model  # pylint: disable=g-import-not-at-top
  accelerator, cpu = jax.devices()[0], jax.devices("cpu")[0]
  reference_experiment = _experiment(args, "float32")
  vocab = reference_experiment.model.encoder.vocab_size
  # Eight batches in turn: the model memorizes them, so the loss falls within the steps.
  batches = [protocol.pretraining_batch(args.batch_size, args.seq_length, args.predictions,
                                        vocab_size=vocab, seed=seed) for seed in range(8)]
  keras.utils.set_random_seed(0)
  reference_task = _task(reference_experiment, None)
  with jax.default_device(cpu):
    reference = trained_model.build(reference_task)
  initial = [np.asarray(w) for w in reference.get_weights()]
  start = time.perf_counter()
  runs = {"cpu_float32_reference": {
      "losses": _losses(reference_task, reference, batches, args.steps, cpu),
      "device": str(cpu), "seconds": time.perf_counter() - start}}
  for precision, policy, matmul in (("bfloat16", "mixed_bfloat16", "default"),
                                    ("float32", "float32", "highest")):
    task = _task(_experiment(args, policy), _accelerator_kernels())
    model = trained_model.build(task)
    model.set_weights(initial)
    start = time.perf_counter()
    with jax.default_matmul_precision(matmul):
      losses = _losses(task, model, batches, args.steps, accelerator)
    reference_losses = np.asarray(runs["cpu_float32_reference"]["losses"])
    relative = np.abs(np.asarray(losses) - reference_losses) / np.abs(reference_losses)
    runs[f"accelerator_{precision}_speed_path"] = {
        "losses": losses, "device": str(accelerator), "matmul_precision": matmul,
        "seconds": time.perf_counter() - start,
        "max_relative_difference": float(relative.max()),
        "mean_relative_difference": float(relative.mean()),
        "tolerance": STEP_TOLERANCE[precision],
        "ok": bool(relative.max() <= STEP_TOLERANCE[precision])}
  return {"size": args.size, "batch_size": args.batch_size, "seq_length": args.seq_length,
          "predictions": args.predictions, "steps": args.steps, "runs": runs,
          "ok": all(r.get("ok", True) for r in runs.values())}


def fixed_inputs(vocab_size: int, seq_length: int) -> dict:
  """The token ids both sides of the export comparison encode: 4 rows of random
  lengths (padding included), int32."""
  batch = protocol.pretraining_batch(4, seq_length, 1, vocab_size=vocab_size, seed=123,
                                     full_length=False)
  return {k: batch[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}


def check_outputs(args) -> dict:
  import jax  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import restore  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import base as task_base  # pylint: disable=g-import-not-at-top
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  from bert_tf.training import trained_model  # pylint: disable=g-import-not-at-top
  experiment = experiments.experiment_from_yaml(
      args.config, overrides=["runtime.mixed_precision_dtype=float32"])
  model = trained_model.build(task_base.get_task(experiment))
  restore.restore_items(args.checkpoint, model.trained_items,
                        items=tuple(model.trained_items))
  inputs = fixed_inputs(experiment.model.encoder.vocab_size,
                        experiment.train_data.seq_length)
  with jax.default_matmul_precision("highest"):
    outputs = model.encoder(inputs, training=False)
  arrays = {**inputs, **{k: np.asarray(outputs[k], np.float32)
                         for k in ("sequence_output", "pooled_output")}}
  np.savez(args.output, **arrays)
  return {"output": args.output, "device": str(jax.devices()[0]),
          "shapes": {k: list(v.shape) for k, v in arrays.items()}}


def check_input(args) -> dict:
  from bert_tf.tasks import base as task_base  # pylint: disable=g-import-not-at-top
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  from bert_tf.training.jax_engine import input as input_lib  # pylint: disable=g-import-not-at-top
  experiment = experiments.experiment_from_yaml(args.config)
  data = experiment.train_data
  host = input_lib.HostInput(task_base.get_task(experiment), data, 0, 1)
  host.next_batch()  # opening the files and starting the readers
  start = time.perf_counter()
  for _ in range(args.steps):
    host.next_batch()
  seconds = time.perf_counter() - start
  return {"batches": args.steps, "global_batch_size": data.global_batch_size,
          "sequences_per_second": args.steps * data.global_batch_size / seconds}


def main(argv=None) -> None:
  args = argument_parser().parse_args(argv)
  if args.check or args.side == "ours":
    os.environ["KERAS_BACKEND"] = "jax"
    # The JAX engine's XLA settings (command buffers off), before JAX starts; a
    # variant's own XLA_FLAGS entry wins.
    from bert_tf.kernels.jax_gpu import xla_flags  # pylint: disable=g-import-not-at-top
    xla_flags.apply_jax_defaults()
  select_device(args.device)
  if args.check:
    logging.basicConfig(level=logging.WARNING)
    result = {"kernels": check_kernels, "steps": check_steps, "outputs": check_outputs,
              "input": check_input}[args.check](args)
  elif args.side == "matmul_jax":
    result = matmul_jax(args)
  elif args.side == "matmul_torch":
    result = matmul_torch(args)
  else:
    result = train_side(args)
  # Whether TensorFlow got imported (a blocked import leaves None in sys.modules).
  protocol.emit("RESULT", dict(result, tensorflow_loaded=sys.modules.get("tensorflow") is not None))


if __name__ == "__main__":
  main()
