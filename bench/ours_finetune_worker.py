"""Our fine-tuning worker: the trainer's loop over the sentence_prediction task's own
input pipeline (GLUE TSV -> in-graph WordPiece -> dynamic padding -> tf.data).

Each timed step pulls the next real batch, so input time is part of the figure.
Spoken to by bench/finetune_throughput.py through bench/peers/protocol.py. The lever
flags change one thing each (bench/finetune_throughput.py --ours_variants runs them
side by side): the engine (--backend), the batching (--batching), XLA (--jit_compile)
and the [CLS]-only last block (--sparse_last_layer). Under --backend=jax the step is the
JAX engine's, over its host input (train_data padded to seq_length, or to the length
buckets).
"""

import tempfile

from bench.peers import protocol
from bert_tf import cpu_kernels

# Before TensorFlow loads: the CPU kernels the tools choose.
cpu_kernels.prefer_onednn()
cpu_kernels.leave_out_absent_gpus()

# Upper bounds (tokens, [CLS] and [SEP]s included) of the length buckets of
# --batching=buckets (train_data.length_buckets); the last bucket ends at seq_length.
BUCKET_BOUNDARIES = [16, 24, 32, 48, 64, 96]


def padded_inputs(task, data_config, input_context):
  """The task's featurized examples, every one padded to seq_length (what Model
  Garden's sentence-prediction data does)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.data.pipelines import batching  # pylint: disable=g-import-not-at-top
  batch_size = batching.batch_size_for(data_config.global_batch_size, input_context)
  loader = task.data_loader(data_config)
  ds = loader.features()
  ds = ds.cache().shuffle(data_config.shuffle_buffer_size, seed=0).repeat()
  values = loader.kind.padding_values(loader.needs)
  values = {k: tf.constant(v, ds.element_spec[k].dtype) for k, v in values.items()}
  shapes = {k: ([data_config.seq_length] if len(s.shape) else []) for k, s in
            ds.element_spec.items()}
  ds = ds.padded_batch(batch_size, padded_shapes=shapes, padding_values=values,
                       drop_remainder=True)
  return ds.prefetch(tf.data.AUTOTUNE)


def main():
  parser = protocol.argument_parser(__doc__, "finetune")
  parser.add_argument("--jit_compile", type=int, default=0)
  parser.add_argument("--sparse_last_layer", type=int, default=1,
                      help="1: the last block runs only at [CLS] (default).")
  parser.add_argument("--batching", default="dynamic",
                      choices=("dynamic", "buckets", "max_length", "packed"),
                      help="dynamic: the task's reader, each batch padded to its longest "
                      "(default); buckets: length buckets; max_length: pad to seq_length; "
                      "packed: each batch's examples packed into rows of seq_length "
                      "(train_data.pack_examples).")
  parser.add_argument("--warmup_steps", type=int, default=3,
                      help="Untimed steps before READY (a whole shuffle window of them "
                      "compiles every length bucket's step on JAX).")
  parser.add_argument("--backend", default="tensorflow", choices=("tensorflow", "jax"),
                      help="The engine that trains: TensorFlow's or JAX's.")
  args = parser.parse_args()
  if args.backend == "jax" and args.batching == "max_length":
    parser.error("--batching=max_length is a TensorFlow input; the JAX engine pads "
                 "to seq_length without length buckets")

  from bert_tf.training import backends  # pylint: disable=g-import-not-at-top
  backends.select(args.backend)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  thread_info = (protocol.set_threads(args, tf) if args.backend == "tensorflow"
                 else {"threads": "XLA's default"})
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import base  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks.sentence_prediction import SentencePredictionConfig  # pylint: disable=g-import-not-at-top
  from bert_tf.training.trainer import Trainer  # pylint: disable=g-import-not-at-top

  experiment = configs.ExperimentConfig(
      task=SentencePredictionConfig(glue_task=args.task),
      model=configs.ModelConfig(encoder=configs.EncoderConfig.from_size(args.size)),
      tokenizer=configs.TokenizerConfig(vocab_file=args.vocab_file, lower_case=True),
      train_data=configs.DataConfig(format="tsv", input_path=args.train_tsv,
                                    global_batch_size=args.batch_size,
                                    seq_length=args.seq_length,
                                    length_buckets=(BUCKET_BOUNDARIES
                                                    if args.batching == "buckets" else []),
                                    pack_examples=args.batching == "packed"),
      optimizer=configs.OptimizerConfig(learning_rate=2e-5, warmup_steps=10,
                                        decay_steps=100000),
      trainer=configs.TrainerConfig(train_steps=100000, steps_per_loop=1),
      runtime=configs.RuntimeConfig(jit_compile=bool(args.jit_compile)))
  task = base.get_task(experiment)
  if not args.sparse_last_layer:
    build_model = task.build_model

    def build_plain_model():
      model = build_model()
      return type(model).from_config({**model.get_config(), "sparse_last_layer": False})

    task.build_model = build_plain_model
  trainer = Trainer(experiment, model_dir=tempfile.mkdtemp(prefix="bert_tf_bench_"), task=task)
  if args.backend == "jax":
    import jax  # pylint: disable=g-import-not-at-top
    trainer.initialize()
    trainer.input.start(0, None)
    framework = f"bert_tf (JAX {jax.__version__})"

    def step():
      trainer.engine.run_steps(1)
  else:
    data_config = experiment.train_data
    def dataset(cfg, ctx):
      return task.data_loader(cfg).dataset(ctx)

    build = {"dynamic": dataset, "buckets": dataset, "packed": dataset,
             "max_length": lambda cfg, ctx: padded_inputs(task, cfg, ctx)}[args.batching]
    iterator = iter(trainer.engine.strategy.distribute_datasets_from_function(
        lambda ctx: build(data_config, ctx)))
    loop = trainer.engine.train_loop_function
    one = tf.constant(1, tf.int32)
    framework = f"bert_tf (TF {tf.__version__})"

    def step():
      float(loop(iterator, one)["loss"])

  protocol.serve(step, warmup_steps=args.warmup_steps, info={
      **thread_info, "backend": args.backend,
      "framework": f"{framework}, {args.batching} padding, task reader",
      "jit_compile": bool(args.jit_compile), "batching": args.batching,
      "sparse_last_layer": bool(args.sparse_last_layer)})


if __name__ == "__main__":
  main()
