"""Our pretraining-step worker: the trainer's own training loop on an in-memory batch.

Runs bert_tf.training.trainer.Trainer's `train_loop_function` (strategy.run inside
tf.function, AdamW with weight-decay exclusions, global-norm clipping, the pretraining
task's loss and metrics) over a batch held in memory, so the figure is the step itself.
Spoken to by bench/pretraining_step.py through bench/peers/protocol.py.
"""

import tempfile

from bench.peers import protocol
from bert_tf import cpu_kernels
from bert_tf.configs.experiment import PRECISIONS

# Before TensorFlow loads: the CPU kernels the tools choose.
cpu_kernels.prefer_onednn()
cpu_kernels.leave_out_absent_gpus()


def build_trainer(size, batch_size, seq_length, predictions, steps_per_loop, jit_compile,
                  full_length=True, dataset_fn=None, mixed_precision="float32",
                  num_cpu_devices=0, fused_kernels=True, sparse_last_layer=True):
  """A Trainer for pretraining whose input repeats one protocol batch (or dataset_fn).

  Returns:
    (trainer, iterator): call trainer.engine.train_loop_function(iterator, n) to run n steps.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks.pretraining import PretrainingTask, PretrainingTaskConfig  # pylint: disable=g-import-not-at-top
  from bert_tf.training.tf_engine import strategies  # pylint: disable=g-import-not-at-top
  from bert_tf.training.trainer import Trainer  # pylint: disable=g-import-not-at-top

  batch = protocol.pretraining_batch(batch_size, seq_length, predictions,
                                     full_length=full_length)

  class InMemoryPretrainingTask(PretrainingTask):
    """The pretraining task reading one batch held in memory, over and over."""

    def build_model(self):
      model = super().build_model()
      if sparse_last_layer:
        return model
      return type(model).from_config({**model.get_config(), "sparse_last_layer": False})

    def data_loader(self, data_config):
      loader = super().data_loader(data_config)
      loader.dataset = lambda input_context=None, start=0: self.in_memory(
          data_config, input_context, start)
      return loader

    def in_memory(self, data_config, input_context, start):
      if dataset_fn is not None:
        return dataset_fn(data_config, input_context, start)
      # Under a mirrored strategy each replica takes the next element of the dataset:
      # the batch is cut into one slice per replica, so that a step still trains on
      # batch_size sequences.
      share = (input_context.get_per_replica_batch_size(batch_size) if input_context
               else batch_size)
      slices = [{k: tf.constant(v[i:i + share]) for k, v in batch.items()}
                for i in range(0, batch_size, share)]
      dataset = tf.data.Dataset.from_tensors(slices[0])
      for piece in slices[1:]:
        dataset = dataset.concatenate(tf.data.Dataset.from_tensors(piece))
      return dataset.repeat()

  experiment = configs.ExperimentConfig(
      task=PretrainingTaskConfig(),
      model=configs.ModelConfig(encoder=configs.EncoderConfig.from_size(size)),
      train_data=configs.DataConfig(format="dummy", global_batch_size=batch_size,
                                    seq_length=seq_length,
                                    max_predictions_per_seq=predictions),
      optimizer=configs.OptimizerConfig(learning_rate=protocol.LEARNING_RATE,
                                        warmup_steps=100, decay_steps=100000,
                                        weight_decay_rate=protocol.WEIGHT_DECAY),
      trainer=configs.TrainerConfig(train_steps=100000, steps_per_loop=steps_per_loop),
      runtime=configs.RuntimeConfig(
          jit_compile=jit_compile, mixed_precision_dtype=mixed_precision,
          fused_kernels=fused_kernels,
          distribution_strategy="mirrored" if num_cpu_devices > 1 else "one_device",
          num_cpu_devices=num_cpu_devices))
  strategies.configure_runtime(experiment.runtime)
  task = InMemoryPretrainingTask(experiment)
  trainer = Trainer(experiment, model_dir=tempfile.mkdtemp(prefix="bert_tf_bench_"), task=task)
  data_config = experiment.train_data
  dataset = trainer.engine.strategy.distribute_datasets_from_function(
      lambda ctx: task.data_loader(data_config).dataset(ctx))
  return trainer, iter(dataset)


def add_lever_flags(parser):
  """Flags that switch one speed lever of ours each (the variants of
  bench/pretraining_step.py)."""
  parser.add_argument("--fused_optimizer", type=int, default=1,
                      help="1: each variable's update is one XLA function (default).")
  parser.add_argument("--sparse_last_layer", type=int, default=1,
                      help="1: the last block runs only where the heads read (default).")
  parser.add_argument("--fused_kernels", type=int, default=1,
                      help="0: runtime.fused_kernels off, the plain Keras layers.")
  parser.add_argument("--xla_fusion", type=int, default=1,
                      help="0: no XLA-fused LayerNorm, GELU and loss (bert_tf.kernels.tensorflow_cpu.fused).")
  parser.add_argument("--keras_dense", type=int, default=0,
                      help="1: Keras's own Dense call instead of bert_tf.kernels.tensorflow_cpu.hooks.dense.")
  parser.add_argument("--keras_dropout", type=int, default=0,
                      help="1: Keras's own dropout mask instead of bert_tf.kernels.tensorflow_cpu.fused.keep_bits.")
  parser.add_argument("--num_cpu_devices", type=int, default=0,
                      help="> 1: MirroredStrategy over this many logical CPU devices "
                      "(runtime.num_cpu_devices), the batch split between them.")


def apply_thread_flags(args):
  """Sets the thread pools (and the levers inside the fused kernels); must run before
  TensorFlow executes its first op and before the model is built."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.kernels.tensorflow_cpu import fused  # pylint: disable=g-import-not-at-top
  from bert_tf.kernels.tensorflow_cpu import hooks  # pylint: disable=g-import-not-at-top
  if not args.xla_fusion:
    fused.applies = lambda *tensors: False
  if args.keras_dense:
    hooks.dense = lambda layer, inputs: layer(inputs)
  if args.keras_dropout:
    import keras  # pylint: disable=g-import-not-at-top

    def keras_keep_bits(self, inputs, training=False):
      # The fused Transformer-block path takes the mask as 16-bit levels: drawn here
      # from Keras's float32 uniform, so the lever covers every dropout of the step.
      if not training or self.rate == 0:
        return None
      threshold = min(int(round(self.rate * 65536)), 65535)
      uniform = keras.random.uniform(tf.shape(inputs), seed=self.seed_generator)
      return (tf.cast(uniform * 65536.0, tf.uint16), tf.constant(threshold, tf.uint16),
              tf.constant(65536 / (65536 - threshold), inputs.dtype))

    fused.keep_bits = keras_keep_bits
  args.thread_info = protocol.set_threads(args, tf)


def apply_model_flags(args, trainer):
  """Switches the optimizer lever; must run before the first step."""
  trainer.optimizer.jit_compile = bool(args.fused_optimizer)


def lever_info(args):
  return {"fused_optimizer": bool(args.fused_optimizer),
          "keras_dropout": bool(args.keras_dropout),
          "keras_dense": bool(args.keras_dense),
          "fused_kernels": bool(args.fused_kernels),
          "xla_fusion": bool(args.xla_fusion),
          "sparse_last_layer": bool(args.sparse_last_layer),
          "mixed_precision": args.mixed_precision,
          **args.thread_info,
          "cpu_devices": args.num_cpu_devices or 1}


def main():
  parser = protocol.argument_parser(__doc__, precisions=PRECISIONS)
  parser.add_argument("--steps_per_loop", type=int, default=1)
  parser.add_argument("--jit_compile", type=int, default=0)
  parser.add_argument("--input_path", default="",
                      help="Pretraining TFRecords to read through the project's reader "
                      "instead of the in-memory batch.")
  add_lever_flags(parser)
  args = parser.parse_args()

  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  apply_thread_flags(args)
  dataset_fn = None
  if args.input_path:
    from bert_tf.data.pipelines import pretraining_reader  # pylint: disable=g-import-not-at-top

    def dataset_fn(data_config, input_context, start):
      return pretraining_reader.build_pretraining_dataset(
          data_config.replace(input_path=args.input_path, format="tfrecord"),
          input_context, start=start)
  trainer, iterator = build_trainer(args.size, args.batch_size, args.seq_length,
                                    args.predictions, args.steps_per_loop,
                                    bool(args.jit_compile),
                                    full_length=bool(args.full_length), dataset_fn=dataset_fn,
                                    mixed_precision=args.mixed_precision,
                                    num_cpu_devices=args.num_cpu_devices,
                                    fused_kernels=bool(args.fused_kernels),
                                    sparse_last_layer=bool(args.sparse_last_layer))
  apply_model_flags(args, trainer)
  loop = trainer.engine.train_loop_function
  n = tf.constant(args.steps_per_loop, tf.int32)

  def step():
    totals = loop(iterator, n)
    float(totals["loss"])  # waits for the step

  params = sum(int(tf.size(v)) for v in trainer.model.trainable_variables)
  protocol.serve(step, warmup_steps=2,
                 info={"framework": f"bert_tf (TF {tf.__version__})", "params": params,
                       "steps_per_call": args.steps_per_loop,
                       "jit_compile": bool(args.jit_compile),
                       "input": args.input_path or "in-memory batch",
                       **lever_info(args)})


if __name__ == "__main__":
  main()
