"""The JAX side of the float8 tests (tests/models/test_float8.py,
tests/integration/test_float8_pretraining.py), run as `KERAS_BACKEND=jax python
tests/models/float8_worker.py COMMAND OUT_DIR [ARGS]` (`run` below; the pytest process
runs Keras on TensorFlow). Each command prints one line `RESULT <json>` last.

  convert      a tiny BertPretrainer's layers after float8.enable, and two training
               steps' effect on the scaling state
  checkpoints  a float8 pretraining run (tools' trainer, 2 steps) restored into a plain
               model, and a plain run's checkpoint warm-starting a float8 model
  quickstart   the quickstart's pretraining (its experiment, on the quickstart's data in
               OUT_DIR: vocab.txt, data/train-*, data/heldout-*) in mixed_bfloat16,
               without and with float8, STEPS steps each; their training losses
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import trainer_helpers  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf import configs  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf import constants  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf import losses  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.models import BertEncoder, BertPretrainer  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.models import float8  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.training import trained_model  # pylint: disable=g-import-not-at-top,wrong-import-position

SCALING = ("inputs_scale", "inputs_amax_history", "kernel_scale", "kernel_amax_history",
           "outputs_grad_scale", "outputs_grad_amax_history")


def run(command: str, *args, timeout: int = 600):
  """Runs a command of this script on JAX in a subprocess; returns its RESULT."""
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env.update(KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="2")
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  result = subprocess.run([sys.executable, os.path.abspath(__file__), command,
                           *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=root, check=False)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  line = [l for l in result.stdout.splitlines() if l.startswith("RESULT ")][-1]
  return json.loads(line[len("RESULT "):])


def _dense_layers(model):
  return {layer.path: layer.quantization_mode for layer in model._flatten_layers()  # pylint: disable=protected-access
          if isinstance(layer, keras.layers.Dense)}


def convert(out_dir: str) -> dict:
  """Converts a tiny mixed_bfloat16 BertPretrainer and trains it two steps (the first
  at learning rate 0, after which the scales follow the first amax history)."""
  del out_dir
  from bert_tf.training.jax_engine import step as jax_step  # pylint: disable=g-import-not-at-top
  from bert_tf.training.jax_engine import optimizer as stateless_optimizer  # pylint: disable=g-import-not-at-top
  encoder_config = configs.EncoderConfig(**trainer_helpers.TINY_ENCODER)
  model = BertPretrainer(BertEncoder.from_config_object(
      encoder_config, dtype=keras.DTypePolicy("mixed_bfloat16")))
  before = len(model.trainable_variables)
  converted = float8.enable(model)
  optimizer = stateless_optimizer.build_stateless_optimizer(
      configs.OptimizerConfig(learning_rate=1e-3, warmup_steps=1), 10,
      model.trainable_variables)
  names = (*constants.ENCODER_INPUTS, constants.MASKED_LM_POSITIONS)
  step = jax_step.make_train_step(
      model, optimizer, lambda batch, outputs, _: losses.pretraining_loss(batch, outputs),
      inputs_fn=lambda batch: {name: batch[name] for name in names})
  rng = np.random.default_rng(0)
  batch, seq, predictions = 4, 16, 4
  data = {
      constants.INPUT_WORD_IDS: rng.integers(5, 100, (batch, seq)).astype(np.int32),
      constants.INPUT_MASK: np.ones((batch, seq), np.int32),
      constants.INPUT_TYPE_IDS: np.zeros((batch, seq), np.int32),
      constants.MASKED_LM_POSITIONS: np.tile(np.arange(1, predictions + 1),
                                             (batch, 1)).astype(np.int32),
      constants.MASKED_LM_IDS: rng.integers(5, 100, (batch, predictions)).astype(np.int32),
      constants.MASKED_LM_WEIGHTS: np.ones((batch, predictions), np.float32),
      constants.NEXT_SENTENCE_LABELS: np.zeros((batch,), np.int32)}
  kernel_before = np.asarray(model.encoder.transformer_layers[0].attention.query.kernel)
  state = jax_step.state_from(model, optimizer)
  for _ in range(2):
    state, logs = step(state, jax_step.shard_batch(data))
  jax_step.write_back(state, model, optimizer)
  query = model.encoder.transformer_layers[0].attention.query
  return {"converted": sorted(converted), "dense": _dense_layers(model),
          "added_variables": len(model.trainable_variables) - before,
          "policy": query.dtype_policy.name, "loss": float(logs["loss"]),
          "kernel_changed": bool(np.any(np.asarray(query.kernel) != kernel_before)),
          "scaling": {name: np.asarray(getattr(query, name)).ravel()[:2].tolist()
                      for name in SCALING}}


def checkpoints(out_dir: str) -> dict:
  """Trains 2 steps with and without float8; restores each checkpoint across."""
  from bert_tf.checkpoints import portable  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import portable_restore  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import base as task_base  # pylint: disable=g-import-not-at-top
  from bert_tf.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top

  def experiment(float8_training, init_checkpoint=""):
    return trainer_helpers.tiny_experiment(
        steps=2, task={"name": "pretraining", "init_checkpoint": init_checkpoint},
        runtime={"float8_training": float8_training})

  def encoder_arrays(model):
    return {v.path: np.asarray(v.value) for v in model.encoder.variables
            if not v.path.endswith(constants.SEED_STATE_NAME)}

  runs = {}
  for name, float8_training in (("float8", True), ("plain", False)):
    keras.backend.clear_session()
    model_dir = os.path.join(out_dir, name)
    trainer_lib.run_experiment(experiment(float8_training), model_dir, "train")
    runs[name] = portable.path_for_step(model_dir, 2)

  # The float8 run's checkpoint into a plain model.
  keras.backend.clear_session()
  plain = trained_model.build(task_base.get_task(experiment(False)))
  portable_restore.restore_items(runs["float8"], plain.checkpoint_items, ("encoder",))
  stored = _stored_encoder(runs["float8"])
  plain_arrays = encoder_arrays(plain)
  extra = sorted(path for path in stored if path not in plain_arrays)
  into_plain = max(float(np.max(np.abs(stored[p] - v))) for p, v in plain_arrays.items())

  # The plain run's checkpoint warm-starts a float8 model.
  keras.backend.clear_session()
  task = task_base.get_task(experiment(True, init_checkpoint=runs["plain"]))
  warm = trained_model.build(task)
  reported = task.initialize(warm)
  stored = _stored_encoder(runs["plain"])
  warm_arrays = encoder_arrays(warm)
  into_float8 = max(float(np.max(np.abs(stored[p] - warm_arrays[p]))) for p in stored)
  unset = sorted({p.rsplit("/", 1)[-1] for p in warm_arrays if p not in stored})
  return {"extra_in_float8_checkpoint": extra, "float8_into_plain": into_plain,
          "plain_into_float8": into_float8, "warm_start_reported": reported,
          "warm_start_float8": any(layer.quantization_mode == float8.MODE for layer
                                   in float8.projections(warm.encoder).values()), "left_at_initial_value": unset,
          "initial_scales": sorted({float(warm_arrays[p].ravel()[0]) for p in warm_arrays
                                    if p.endswith("_scale")}),
          "float8_amax_trained": float(max(np.max(v) for p, v in _stored_encoder(
              runs["float8"]).items() if p.endswith("amax_history")))}


def quickstart(out_dir: str, steps: str) -> dict:
  """Trains the quickstart's experiment as tools/quickstart.py --backend=jax does (one
  device), in mixed_bfloat16, twice: plain and with runtime.float8_training."""
  from bert_tf.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
  from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
  from bert_tf.training import summaries  # pylint: disable=g-import-not-at-top
  with open(os.path.join(out_dir, "vocab.txt"), encoding="utf-8") as f:
    vocab_size = sum(1 for _ in f)
  losses_by_run = {}
  for name, float8_training in (("bfloat16", False), ("float8", True)):
    keras.backend.clear_session()
    experiment = experiments.resolve_experiment("pretraining_quickstart", params_override=[
        f"model.encoder.vocab_size={vocab_size}",
        f"train_data.input_path={out_dir}/data/train-*.tfrecord",
        f"eval_data.input_path={out_dir}/data/heldout-*.tfrecord",
        f"tokenizer.vocab_file={out_dir}/vocab.txt", f"trainer.train_steps={steps}",
        f"trainer.checkpoint_interval={steps}", "trainer.summary_interval=50",
        "trainer.steps_per_loop=50", "runtime.distribution_strategy=one_device",
        "runtime.num_cpu_devices=0", "runtime.mixed_precision_dtype=mixed_bfloat16",
        f"runtime.float8_training={str(float8_training).lower()}"])
    model_dir = os.path.join(out_dir, name)
    trainer_lib.run_experiment(experiment, model_dir, "train")
    losses_by_run[name] = summaries.read_scalars(os.path.join(model_dir, "train"))["loss"]
  return losses_by_run


def _stored_encoder(path):
  import h5py  # pylint: disable=g-import-not-at-top
  out = {}
  with h5py.File(path, "r") as f:
    f["items/encoder"].visititems(
        lambda name, node: out.__setitem__(name, node[()]) if hasattr(node, "shape") else None)
  return out


if __name__ == "__main__":
  command, args = sys.argv[1], sys.argv[2:]
  print("RESULT " + json.dumps({"convert": convert, "checkpoints": checkpoints,
                                "quickstart": quickstart}[command](*args)), flush=True)
