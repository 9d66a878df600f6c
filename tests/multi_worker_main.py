"""One worker of a two-process MultiWorkerMirroredStrategy run on 127.0.0.1.

  python tests/multi_worker_main.py WORKER_INDEX PORT0,PORT1 MODEL_DIR OUTPUT.npz [STEPS]

Trains a tiny pretraining model on dummy data for a few steps (STEPS: that many, one
per loop, with a progress line each, and no checkpoint before the end) and writes this
worker's final loss and weights to OUTPUT.npz (tests/training/test_strategies.py compares the
workers).
"""

import json
import os
import sys


def main(argv):
  index, ports, model_dir, output = int(argv[1]), argv[2].split(","), argv[3], argv[4]
  os.environ["TF_CONFIG"] = json.dumps({
      "cluster": {"worker": [f"127.0.0.1:{port}" for port in ports]},
      "task": {"type": "worker", "index": index},
  })
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  import numpy as np  # pylint: disable=g-import-not-at-top
  import trainer_helpers  # pylint: disable=g-import-not-at-top
  from bert_tf.training.tf_engine import strategies  # pylint: disable=g-import-not-at-top
  from bert_tf.training.trainer import Trainer  # pylint: disable=g-import-not-at-top

  trainer_config = dict(steps_per_loop=2)
  steps = 4
  if len(argv) > 5:
    steps = int(argv[5])
    trainer_config = dict(steps_per_loop=1, log_interval=1, summary_interval=1,
                          checkpoint_interval=steps)
  experiment = trainer_helpers.tiny_experiment(
      strategy="multi_worker_mirrored", steps=steps, batch=8,
      optimizer=dict(warmup_steps=0), trainer=trainer_config)
  strategies.configure_runtime(experiment.runtime)
  trainer = Trainer(experiment, model_dir, log_fn=lambda line: print(line, flush=True))
  report = trainer.train()
  weights = trainer_helpers.weights_of(trainer.model)
  np.savez(output, loss=report["loss"], step=trainer.step,
           replicas=trainer.engine.strategy.num_replicas_in_sync,
           **{k.replace("/", "."): v for k, v in weights.items()})
  print(f"worker {index} done: loss {report['loss']:.6f}", flush=True)


if __name__ == "__main__":
  main(sys.argv)
