"""Trainings of the tests on either engine, run as `KERAS_BACKEND=jax|tensorflow python
tests/engine_worker.py COMMAND ARGS...` (Keras fixes its backend per process, and the
pytest process runs TensorFlow). Each command prints one line `RESULT <json>` last.

  train CONFIG_YAML MODEL_DIR MODE      bert_tf.training.trainer.run_experiment
  kinds OUT_DIR                         every experiment kind, 2 steps + evaluation
  accumulation OUT_DIR                  2 micro-batches against one batch
  fill_mask MODEL_DIR TEXTS_JSON OUT    the trained model's top-k answers at each [MASK]
  weights CHECKPOINT OUT                a checkpoint's encoder weights, restored on JAX
  compilations OUT_DIR                  fine-tuning from TSV with length buckets: how
                                        often the JAX step compiles
  train_to RECORDS MODEL_DIR STEPS ...  trains each model dir to its step in turn
  shuffled_train_to RECORDS ...         the same, records shuffled by the defaults
  tsv_train_to TSVS VOCAB ...           the same, sentence_prediction on raw TSV files
  initial_weights SEED OUT              a tiny pretrainer's weights as built with SEED
  policies OUT_DIR RECORDS_DIR          the trainer's policies (policy_scenarios.py) on
                                        this engine
  several COMMANDS_JSON                 several of the above in this one process (a JSON
                                        list of [COMMAND, ARGS...]): their RESULTs as a list
"""

import json
import os
import sys

import keras
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import finetuning_helpers  # pylint: disable=g-import-not-at-top
import policy_scenarios  # pylint: disable=g-import-not-at-top
import trainer_helpers  # pylint: disable=g-import-not-at-top
from bert_tf import constants  # pylint: disable=g-import-not-at-top
from bert_tf.checkpoints import portable  # pylint: disable=g-import-not-at-top
from bert_tf.checkpoints import restore  # pylint: disable=g-import-not-at-top
from bert_tf.tasks import base as task_base  # pylint: disable=g-import-not-at-top
from bert_tf.training import experiments  # pylint: disable=g-import-not-at-top
from bert_tf.training import trained_model
from bert_tf.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top

TOP_K = 3
TAGS = ["O", "B-PER", "I-PER"]


def _result(value) -> None:
  print("RESULT " + json.dumps(value), flush=True)


def train(config_path: str, model_dir: str, mode: str) -> dict:
  experiment = experiments.experiment_from_yaml(config_path)
  return trainer_lib.run_experiment(experiment, model_dir, mode)


def kinds(out_dir: str) -> dict:
  """Trains each experiment kind for 2 steps on dummy data, then evaluates it."""
  vocab = finetuning_helpers.write_vocab(os.path.join(out_dir, "vocab.txt"))

  def tiny(task):
    # Dummy fine-tuning input is endless: evaluate two batches.
    return finetuning_helpers.tiny_experiment(task, {"format": "dummy"}, steps=2,
                                              vocab_file=vocab).override(
                                                  {"trainer": {"validation_steps": 2}})

  runs = {
      "pretraining": experiments.experiment_from_dict(
          trainer_helpers.tiny_experiment_dict(steps=2)),
      "glue_mrpc": tiny({"name": "sentence_prediction", "glue_task": "mrpc"}),
      "squad_v1.1": tiny({"name": "squad"}),
      "squad_v2.0": tiny({"name": "squad", "version_2_with_negative": True}),
      "ner": tiny({"name": "tagging", "label_names": TAGS}),
      "swag": tiny({"name": "multiple_choice"}),
  }
  teacher = os.path.join(out_dir, "glue_mrpc")
  runs["distillation"] = tiny({
      "name": "distillation", "glue_task": "mrpc", "teacher_checkpoint": teacher,
      "teacher_encoder": runs["glue_mrpc"].model.encoder.as_dict()}).override(
          {"model": {"encoder": {"num_layers": 1}}})
  results = {}
  for name, experiment in runs.items():
    keras.backend.clear_session()
    report = trainer_lib.run_experiment(experiment, os.path.join(out_dir, name),
                                     "train_and_eval")
    results[name] = {k: float(v) for k, v in report.items()}
  return results


def initial_weights(seed: str, out_path: str) -> dict:
  """Saves {variable path: value} of a tiny BertPretrainer built after
  keras.utils.set_random_seed(seed)."""
  from bert_tf.models import BertEncoder, BertPretrainer  # pylint: disable=g-import-not-at-top
  keras.utils.set_random_seed(int(seed))
  model = BertPretrainer(BertEncoder(**trainer_helpers.TINY_ENCODER))
  np.savez(out_path, **{v.path: keras.ops.convert_to_numpy(v) for v in model.variables
                        if v.trainable})
  return {"backend": keras.backend.backend()}


def compilations(out_dir: str) -> dict:
  """20 steps of sentence classification from a TSV of sentences of 1-30 pieces, batches
  padded to the length buckets 8, 16 and seq_length 32."""
  vocab = finetuning_helpers.write_vocab(os.path.join(out_dir, "vocab.txt"))
  rng = np.random.default_rng(0)
  words = list(finetuning_helpers.WORDS[:10])
  lines = ["sentence\tlabel"] + [
      f"{' '.join(rng.choice(words, size=rng.integers(1, 31)))}\t{i % 2}" for i in range(160)]
  path = os.path.join(out_dir, "train.tsv")
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  experiment = finetuning_helpers.tiny_experiment(
      {"name": "sentence_prediction", "text_a_column": "sentence", "num_classes": 2},
      {"format": "tsv", "input_path": path, "length_buckets": [8, 16]}, steps=20,
      seq_length=32, vocab_file=vocab)
  trainer = trainer_lib.Trainer(experiment, os.path.join(out_dir, "run"),
                                log_fn=lambda _: None)
  trainer.train()
  return {"steps": trainer.step, "step_traces": trainer.engine.step_traces}


def accumulation(out_dir: str) -> dict:
  """4 steps of batch 8 as 2 accumulated micro-batches of 4 (a) and as one batch (b),
  without dropout; the largest difference of their weights."""
  def run(name, accumulation_steps):
    data = trainer_helpers.tiny_experiment_dict(
        steps=4, trainer={"checkpoint_interval": 4,
                          "gradient_accumulation_steps": accumulation_steps})
    keras.backend.clear_session()
    trainer_lib.run_experiment(experiments.experiment_from_dict(data),
                            os.path.join(out_dir, name), "train")
    return portable.arrays(os.path.join(out_dir, name, "ckpt-4.h5"))

  return {"accumulated_weights": policy_scenarios.largest_difference(
      run("a", 2), run("b", 1), "items/")}


def fill_mask(model_dir: str, texts_path: str, out_path: str) -> dict:
  """Top-k ids and probabilities at the first max_masks [MASK]s of each text, packed
  by the export's TextEncoder, from the model restored from model_dir on JAX."""
  from bert_tf.export import text_encoding  # pylint: disable=g-import-not-at-top
  from bert_tf.text.tokenizer import BertWordPieceTokenizer  # pylint: disable=g-import-not-at-top
  experiment = experiments.experiment_from_yaml(os.path.join(model_dir, "params.yaml"))
  task = task_base.get_task(experiment)
  model = trained_model.build(task)
  restore.restore_items(model_dir, model.checkpoint_items, tuple(model.checkpoint_items))
  with open(texts_path, encoding="utf-8") as f:
    texts = json.load(f)
  tokenizer = BertWordPieceTokenizer(experiment.tokenizer.vocab_file,
                                     lower_case=experiment.tokenizer.lower_case)
  encoder = text_encoding.TextEncoder(tokenizer, experiment.train_data.seq_length)
  inputs = {k: np.asarray(v).astype(np.int32)
            for k, v in encoder.encode_with_masks(np.asarray(texts, object)).items()}
  max_masks = task.serving_options(experiment.eval_data)["max_masks"]
  ids = inputs[constants.INPUT_WORD_IDS]
  positions = np.zeros((len(texts), max_masks), np.int32)
  for row in range(len(texts)):
    found = np.flatnonzero(ids[row] == tokenizer.mask_id)[:max_masks]
    positions[row, :len(found)] = found
  model_inputs = {name: inputs[name] for name in constants.ENCODER_INPUTS}
  model_inputs[constants.MASKED_LM_POSITIONS] = positions
  logits = np.asarray(model(model_inputs, training=False)[constants.MLM_LOGITS], np.float64)
  probabilities = np.exp(logits - logits.max(-1, keepdims=True))
  probabilities /= probabilities.sum(-1, keepdims=True)
  top = np.argsort(-probabilities, axis=-1, kind="stable")[..., :TOP_K]
  np.savez(out_path, positions=positions, top_k_ids=top,
           top_k_probabilities=np.take_along_axis(probabilities, top, -1))
  return {"backend": keras.backend.backend()}


def weights(checkpoint: str, out_path: str) -> dict:
  """Restores the encoder of `checkpoint` (its directory's params.yaml's model) on JAX
  and saves {variable path: value}."""
  directory = checkpoint if os.path.isdir(checkpoint) else os.path.dirname(checkpoint)
  experiment = experiments.experiment_from_yaml(os.path.join(directory, "params.yaml"))
  model = task_base.get_task(experiment).build_model()
  restore.restore_items(checkpoint, model.checkpoint_items, ("encoder",))
  np.savez(out_path, **{v.path: np.asarray(v.value)
                        for v in model.checkpoint_items["encoder"].trainable_variables})
  return {"backend": keras.backend.backend()}


COMMANDS = {"train": train, "kinds": kinds, "accumulation": accumulation,
            "fill_mask": fill_mask, "weights": weights, "compilations": compilations,
            "initial_weights": initial_weights, "train_to": policy_scenarios.train_to,
            "shuffled_train_to": policy_scenarios.shuffled_train_to,
            "tsv_train_to": policy_scenarios.tsv_train_to,
            "policies": policy_scenarios.run_all}


def several(commands_json: str) -> list:
  """Runs each [COMMAND, ARGS...] of the JSON list in turn in this process (one start of
  the backend for all); returns their results in order."""
  results = []
  for command, *args in json.loads(commands_json):
    keras.backend.clear_session()
    results.append(COMMANDS[command](*map(str, args)))
  return results


if __name__ == "__main__":
  command, args = sys.argv[1], sys.argv[2:]
  _result(dict(COMMANDS, several=several)[command](*args))
