"""Our fine-tuning worker: the trainer's loop over the sentence_prediction task's own
input pipeline (GLUE TSV -> in-graph WordPiece -> dynamic padding -> tf.data).

Each timed step pulls the next real batch, so input time is part of the figure.
Spoken to by bench/finetune_throughput.py through bench/peers/protocol.py; the
RESULT of each call also carries the number of examples and padded tokens it saw.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))

import protocol  # pylint: disable=g-import-not-at-top,wrong-import-position


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--size", default="mini")
  parser.add_argument("--task", default="sst2")
  parser.add_argument("--train_tsv", required=True)
  parser.add_argument("--vocab_file", required=True)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--seq_length", type=int, default=128)
  parser.add_argument("--jit_compile", type=int, default=0)
  args = parser.parse_args()

  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import base  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks.sentence_prediction import SentencePredictionConfig  # pylint: disable=g-import-not-at-top
  from bert_tf.training.trainer import Trainer  # pylint: disable=g-import-not-at-top

  experiment = configs.ExperimentConfig(
      task=SentencePredictionConfig(glue_task=args.task),
      model=configs.ModelConfig(encoder=configs.EncoderConfig.from_size(args.size)),
      train_data=configs.DataConfig(format="tsv", input_path=args.train_tsv,
                                    vocab_file=args.vocab_file, lower_case=True,
                                    global_batch_size=args.batch_size,
                                    seq_length=args.seq_length),
      optimizer=configs.OptimizerConfig(learning_rate=2e-5, warmup_steps=10,
                                        decay_steps=100000),
      trainer=configs.TrainerConfig(train_steps=100000, steps_per_loop=1),
      runtime=configs.RuntimeConfig(jit_compile=bool(args.jit_compile)))
  task = base.get_task(experiment)
  trainer = Trainer(experiment, model_dir="/tmp/bert_tf_bench_unused", task=task)
  data_config = experiment.train_data
  iterator = iter(trainer.strategy.distribute_datasets_from_function(
      lambda ctx: task.build_inputs(data_config, ctx)))
  loop = trainer.train_loop_function
  one = tf.constant(1, tf.int32)

  def step():
    float(loop(iterator, one)["loss"])

  protocol.serve(step, warmup_steps=3, info={
      "framework": f"bert_tf (TF {tf.__version__}), dynamic padding, task reader",
      "jit_compile": bool(args.jit_compile)})


if __name__ == "__main__":
  main()
