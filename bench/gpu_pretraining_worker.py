"""The worker of bench/gpu_pretraining.py: one process times one thing, then prints one
`RESULT {json}` line on stdout.

  --side=matmul_jax, matmul_torch   the device's dense matmul rate (FLOP/s) in jax or
                                    torch, the denominator of the MFU column
  --side=ours                       bert_tf's JAX training step
                                    (bert_tf.training.jax_engine.step over BertPretrainer)
  --side=hf_eager, hf_compile       Hugging Face BertForPreTraining in torch, eager or
                                    under torch.compile

The driver starts one worker per configuration, so that jax and torch never hold the
accelerator's memory at once and a failed compile loses one figure, not the run.
Nothing here imports TensorFlow (the GPU machines have none): at import this module
needs only the standard library and numpy; each side imports its own framework.

Every step is synchronized before its clock stops (jax: block_until_ready; torch:
cuda.synchronize), so each step has its own time: the spread comes from them. The
first step (tracing, compilation, autotuning, allocation) is timed apart, then
--warmup_steps more run untimed.
"""

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import protocol  # pylint: disable=g-import-not-at-top,wrong-import-position

SIDES = ("matmul_jax", "matmul_torch", "ours", "hf_eager", "hf_compile")
# Both sides take the optimizer's settings from bert_tf.configs.OptimizerConfig's
# defaults (those of the original BERT: AdamW at 1e-4 after 10,000 warm-up steps, decay
# 0.01, clipping at 1.0); the linear decay ends at the original's last step.
DECAY_STEPS = 1_000_000


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


def repeat_rate(run, sync, flops: float, seconds: float, rounds: int):
  """Median and best FLOP/s of `run` (one product of `flops` FLOPs), timed in `rounds`
  rounds of back-to-back calls lasting about `seconds` each, after one untimed call."""
  run()
  sync()
  start = time.perf_counter()
  run()
  sync()
  reps = max(1, math.ceil(seconds / max(time.perf_counter() - start, 1e-9)))
  rates = []
  for _ in range(rounds):
    start = time.perf_counter()
    for _ in range(reps):
      run()
    sync()
    rates.append(flops * reps / (time.perf_counter() - start))
  return statistics.median(rates), max(rates)


# --------------------------------------------------------------------------------------
# The matmul rate.

def matmul_jax(args) -> dict:
  """bf16 (or float32) [M, K] x [K, N] products under jax.jit on jax's default device."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  dtype = jnp.bfloat16 if args.precision == "bf16" else jnp.float32
  product = jax.jit(lambda a, b: a @ b)
  per_shape, key = {}, jax.random.PRNGKey(0)
  for m, k, n in parse_shapes(args.matmul_shapes):
    a = jax.random.normal(key, (m, k), dtype)
    b = jax.random.normal(key, (k, n), dtype)
    out = []
    def run():
      out[:] = [product(a, b)]
    per_shape[f"{m}x{k}x{n}"] = repeat_rate(run, lambda: out[0].block_until_ready(),
                                            2.0 * m * k * n, args.matmul_seconds,
                                            args.matmul_rounds)
  return {"framework": f"jax {jax.__version__}", "device": jax_device_name(jax),
          **rate_summary(per_shape)}


def matmul_torch(args) -> dict:
  """bf16 (or float32) torch.matmul products on CUDA when there is a GPU, else the CPU."""
  import torch  # pylint: disable=g-import-not-at-top
  device, sync = torch_device(torch, args.device)
  dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
  generator = torch.Generator(device=device).manual_seed(0)
  per_shape = {}
  with torch.no_grad():
    for m, k, n in parse_shapes(args.matmul_shapes):
      a = torch.randn(m, k, device=device, dtype=dtype, generator=generator)
      b = torch.randn(k, n, device=device, dtype=dtype, generator=generator)
      per_shape[f"{m}x{k}x{n}"] = repeat_rate(lambda: torch.matmul(a, b), sync,
                                              2.0 * m * k * n, args.matmul_seconds,
                                              args.matmul_rounds)
  return {"framework": f"torch {torch.__version__}", "device": torch_device_name(torch),
          **rate_summary(per_shape)}


def rate_summary(per_shape) -> dict:
  """The best median over shapes (as bench/matmul_peak.py), with every shape's figures."""
  return {"flops_per_second": max(median for median, _ in per_shape.values()),
          "per_shape": {shape: {"median_flops_per_second": median,
                                "best_flops_per_second": best}
                        for shape, (median, best) in per_shape.items()}}


# --------------------------------------------------------------------------------------
# Devices.

def jax_device_name(jax) -> str:
  device = jax.devices()[0]
  if device.platform == "cpu":
    return cpu_name()
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
  return cpu_name()


def cpu_name() -> str:
  """'AMD EPYC ... (cpu, 2 cores)' from /proc/cpuinfo."""
  name = platform.processor() or "unknown CPU"
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          name = line.split(":", 1)[1].strip()
          break
  except OSError:
    pass
  return f"{name} (cpu, {os.cpu_count()} cores)"


# --------------------------------------------------------------------------------------
# bert_tf on JAX.

def ours_step(args) -> dict:
  """Times bert_tf's JAX training step: BertPretrainer over BertEncoder (the reference
  layers, kernels=None) in Keras's mixed_bfloat16 policy, bert_tf.losses.pretraining_loss,
  Keras AdamW with the project's schedule, weight decay and global-norm clipping
  (bert_tf.configs.OptimizerConfig's defaults), compiled by
  bert_tf.training.jax_engine.step.make_train_step (state donated)."""
  os.environ["KERAS_BACKEND"] = "jax"
  import jax  # pylint: disable=g-import-not-at-top
  import keras  # pylint: disable=g-import-not-at-top
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  from bert_tf import constants  # pylint: disable=g-import-not-at-top
  from bert_tf import losses  # pylint: disable=g-import-not-at-top
  from bert_tf.models import BertEncoder, BertPretrainer  # pylint: disable=g-import-not-at-top
  from bert_tf.training.jax_engine import step as jax_step  # pylint: disable=g-import-not-at-top
  from bert_tf.training import keras_optimizers  # pylint: disable=g-import-not-at-top
  policy = "mixed_bfloat16" if args.precision == "bf16" else "float32"
  config = configs.EncoderConfig.from_size(args.size)
  model = BertPretrainer(BertEncoder.from_config_object(config, dtype=policy))
  # The JAX trainer's optimizer: Keras AdamW with the project's schedule, weight-decay
  # exclusions (by variable path) and global-norm clipping.
  optimizer = keras_optimizers.build_keras_optimizer(
      configs.OptimizerConfig(), DECAY_STEPS, model.trainable_variables)
  input_names = (*constants.ENCODER_INPUTS, constants.MASKED_LM_POSITIONS)
  step_fn = jax_step.make_train_step(
      model, optimizer, lambda batch, outputs, _: losses.pretraining_loss(batch, outputs),
      inputs_fn=lambda batch: {name: batch[name] for name in input_names})
  state = [jax_step.state_from(model, optimizer)]
  batch = jax_step.shard_batch(synthetic_batch(args, config.vocab_size))

  def step():
    state[0], logs = step_fn(state[0], batch)
    return logs["loss"]

  timing = time_steps(step, lambda: jax.block_until_ready(state[0]), args.warmup_steps,
                      args.steps)
  memory = jax.devices()[0].memory_stats() or {}
  return {**timing, "framework": f"bert_tf on keras {keras.__version__}, "
                                 f"jax {jax.__version__}",
          "device": jax_device_name(jax),
          "params": sum(int(math.prod(v.shape)) for v in model.trainable_variables),
          "peak_memory_mb": (memory["peak_bytes_in_use"] / 2**20
                             if "peak_bytes_in_use" in memory else None)}


# --------------------------------------------------------------------------------------
# Hugging Face transformers.

def hf_step(args, compiled: bool) -> dict:
  """Times BertForPreTraining of the same size as ours: SDPA attention, bf16 autocast,
  fused AdamW (no decay on biases and LayerNorm), global-norm clipping, the linear
  warm-up/decay schedule; with `compiled`, the forward and loss under torch.compile
  (its backward compiled with it)."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  device, sync = torch_device(torch, args.device)
  torch.manual_seed(0)
  config = configs.EncoderConfig.from_size(args.size)
  settings = configs.OptimizerConfig()
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
      optimizer, settings.warmup_steps, DECAY_STEPS)

  batch = {name: torch.from_numpy(value).long().to(device)
           for name, value in synthetic_batch(args, config.vocab_size).items()}
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

  if device == "cuda":
    torch.cuda.reset_peak_memory_stats()
  timing = time_steps(step, sync, args.warmup_steps, args.steps)
  return {**timing,
          "framework": f"transformers {transformers.__version__}, torch {torch.__version__}",
          "device": torch_device_name(torch),
          "params": sum(p.numel() for p in model.parameters()),
          "peak_memory_mb": (torch.cuda.max_memory_allocated() / 2**20
                             if device == "cuda" else None)}


def synthetic_batch(args, vocab_size: int) -> dict:
  """The random batch every side trains on (bench/peers/protocol.py): full-length rows,
  --predictions sorted masked positions each; numpy int32/float32 arrays."""
  return protocol.pretraining_batch(args.batch_size, args.seq_length, args.predictions,
                                    vocab_size=vocab_size)


# --------------------------------------------------------------------------------------

def select_device(device: str) -> None:
  """Points jax and torch at the --device asked for, before either is imported."""
  if device == "cpu":
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
  elif device == "gpu":
    os.environ["JAX_PLATFORMS"] = "cuda"  # jax raises when it finds no CUDA device.


def main(argv=None) -> None:
  args = argument_parser().parse_args(argv)
  select_device(args.device)
  if args.side == "matmul_jax":
    result = matmul_jax(args)
  elif args.side == "matmul_torch":
    result = matmul_torch(args)
  elif args.side == "ours":
    result = ours_step(args)
  else:
    result = hf_step(args, compiled=args.side == "hf_compile")
  result["tensorflow_loaded"] = tensorflow_loaded()
  sys.stdout.write("RESULT " + json.dumps(result) + "\n")
  sys.stdout.flush()


if __name__ == "__main__":
  main()
