"""The GPU numerics checks of bench/gpu_trainer.py, one per process: each prints one
`RESULT {json}` line on stdout. JAX and Keras only (no TensorFlow).

  --check=kernels  the JAX speed path's Pallas attention and residual LayerNorm against
                   their XLA forms (bert_tf.kernels.jax_gpu), outputs and gradients, in
                   float32 and bfloat16, with and without dropout (the same hashed
                   masks in both forms), on the accelerator; gpu_attention=auto's check
                   (hooks.pallas_attention_works) on it, and its fallback to XLA ops
                   where the kernel fails to compile or disagrees, and for shapes the
                   kernel does not take
  --check=steps    from one initialization, --steps training steps of --size on the
                   accelerator (the speed path, bf16 and float32) against the float32
                   reference layers on the CPU, dropout off, the same batches: the loss
                   of every step; each the JAX engine's step of the pretraining task
                   (its model, loss, loss normalizers and inputs, the stateless
                   optimizer)
  --check=outputs  a trainer checkpoint restored on the accelerator; the encoder's
                   float32 outputs for fixed token ids, saved to --output (.npz) for the
                   comparison with its SavedModel on a CPU (bench/gpu_trainer.py
                   --stage=compare)
  --check=input    the host input alone (bert_tf.training.jax_engine.input, the
                   TensorFlow-free reader the trainer uses): sequences/s of
                   --config's training data

Where JAX has no GPU (the CPU dry run) the accelerator is the CPU and the Pallas
kernels run in Pallas's interpreter.
"""

import argparse
import logging
import os
import time

import numpy as np

from bench import gpu_pretraining_worker
from bench.peers import protocol

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
  parser.add_argument("--check", required=True, choices=CHECKS)
  parser.add_argument("--size", default="small", help="steps: the encoder size.")
  parser.add_argument("--batch_size", type=int, default=16)
  parser.add_argument("--seq_length", type=int, default=128)
  parser.add_argument("--predictions", type=int, default=20)
  parser.add_argument("--steps", type=int, default=100, help="steps: training steps.")
  parser.add_argument("--heads", type=int, default=12, help="kernels: attention heads.")
  parser.add_argument("--hidden", type=int, default=768,
                      help="kernels: the LayerNorm's width (heads x 64 for attention).")
  parser.add_argument("--checkpoint", default="", help="outputs: a trainer checkpoint.")
  parser.add_argument("--config", default="", help="outputs, input: the experiment YAML "
                      "(a model_dir's params.yaml).")
  parser.add_argument("--output", default="", help="outputs: the .npz to write.")
  return parser


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
  """gpu_attention=auto on this device, then with the kernel made to fail to compile and
  to disagree (each must fall back to XLA ops), and the hook on a shape the kernel does
  not take (it must compute xla_attention's result)."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from bert_tf.kernels.jax_gpu import attention  # pylint: disable=g-import-not-at-top
  from bert_tf.kernels.jax_gpu import hooks  # pylint: disable=g-import-not-at-top
  on_gpu = jax.default_backend() == "gpu"
  out = {"on_gpu": on_gpu, "kernel_works": hooks.pallas_attention_works(),
         "auto_picks": hooks.JaxGpuKernels(attention="auto").attention_implementation}
  original = attention.flash_attention

  def failing(*args, **kwargs):
    raise RuntimeError("compilation failed (made to fail by bench/gpu_numerics.py)")

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
  accelerator, cpu = jax.devices()[0], jax.devices("cpu")[0]
  reference_experiment = _experiment(args, "float32")
  vocab = reference_experiment.model.encoder.vocab_size
  # Eight batches in turn: the model memorizes them, so the loss falls within the steps.
  batches = [protocol.pretraining_batch(args.batch_size, args.seq_length, args.predictions,
                                        vocab_size=vocab, seed=seed) for seed in range(8)]
  keras.utils.set_random_seed(0)
  reference_task = _task(reference_experiment, None)
  with jax.default_device(cpu):
    reference = reference_task.build_tuned_model()
  initial = [np.asarray(w) for w in reference.get_weights()]
  start = time.perf_counter()
  runs = {"cpu_float32_reference": {
      "losses": _losses(reference_task, reference, batches, args.steps, cpu),
      "device": str(cpu), "seconds": time.perf_counter() - start}}
  for precision, policy, matmul in (("bfloat16", "mixed_bfloat16", "default"),
                                    ("float32", "float32", "highest")):
    task = _task(_experiment(args, policy), _accelerator_kernels())
    model = task.build_tuned_model()
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
  experiment = experiments.experiment_from_yaml(
      args.config, overrides=["runtime.mixed_precision_dtype=float32"])
  model = task_base.get_task(experiment).build_tuned_model()
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
  os.environ["KERAS_BACKEND"] = "jax"
  # The JAX engine's XLA settings (command buffers off), before JAX starts.
  from bert_tf.kernels.jax_gpu import xla_flags  # pylint: disable=g-import-not-at-top
  xla_flags.apply_jax_defaults()
  logging.basicConfig(level=logging.WARNING)
  result = {"kernels": check_kernels, "steps": check_steps, "outputs": check_outputs,
            "input": check_input}[args.check](args)
  gpu_pretraining_worker.print_result(result)


if __name__ == "__main__":
  main()
