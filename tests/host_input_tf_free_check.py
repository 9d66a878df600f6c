"""Run as a script with TensorFlow made unimportable: imports every task, reads each
case of host_input_helpers.task_experiments through the host form of their data loaders (TFRecords the
parent test wrote, and the dummy inputs), saves a position and restores it in a fresh
input, checks the pretraining files, and checks the one-line errors of what needs
TensorFlow (raw task files), and reads pretraining records with dynamic masking. Then,
as the JAX install would, converts the Hugging Face classifier folder files["hf_folder"]
with tools/convert_checkpoint.py and restores the converted folder into the model its
params.yaml's task builds (what --init_checkpoint does on the JAX engine), computing the
logits of the token ids in files["token_ids"] (in one process with the rest: a process
without TensorFlow takes seconds to start). Writes the first batches of each case and
those logits to OUT_DIR/batches.npz and prints one JSON line of findings
(tests/tasks/test_host_inputs.py).

  python tests/host_input_tf_free_check.py FILES_JSON OUT_DIR
"""

import json
import os
import runpy
import sys

sys.modules["tensorflow"] = None  # any import of TensorFlow now fails
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

import host_input_helpers  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf import configs  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf import constants  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.checkpoints import restore  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.tasks import base  # pylint: disable=g-import-not-at-top,wrong-import-position

BATCHES = 2


def experiment(data):
  return configs.ExperimentConfig.from_dict(data, task_configs=base.task_configs())


def error_of(fn):
  try:
    fn()
  except configs.ConfigError as e:
    return str(e)
  return None


def convert_and_restore(hf_folder, token_ids, output_dir):
  """Converts `hf_folder` with the tool as its command runs (its exit status must be
  0), restores `output_dir` into its task's model; returns (the folder's files, the
  logits of `token_ids`)."""
  tool = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "tools", "convert_checkpoint.py")
  sys.argv = [tool, f"--input={hf_folder}", f"--output_dir={output_dir}"]
  try:
    runpy.run_path(tool, run_name="__main__")
  except SystemExit as e:
    assert not e.code, e.code
  exp = experiment(configs.load_yaml(os.path.join(output_dir, "params.yaml")))
  model = base.get_task(exp).build_model()
  restore.restore_items(output_dir, model.checkpoint_items, items=tuple(
      model.checkpoint_items))
  ids = np.load(token_ids)
  outputs = model({constants.INPUT_WORD_IDS: ids, constants.INPUT_MASK: np.ones_like(ids),
                   constants.INPUT_TYPE_IDS: np.zeros_like(ids)})
  return sorted(os.listdir(output_dir)), np.asarray(outputs["logits"])


def main():
  with open(sys.argv[1], encoding="utf-8") as f:
    files = json.load(f)
  out_dir = sys.argv[2]
  arrays, found = {}, {}
  for case, data in host_input_helpers.task_experiments(files).items():
    exp = experiment(data)
    task = base.get_task(exp)
    task.data_loader(exp.eval_data).check_files()
    batches = task.data_loader(exp.eval_data).host_batches()
    for i in range(BATCHES):
      for key, value in next(batches).items():
        arrays[f"{case}/{i}/{key}"] = value
    training = task.data_loader(exp.replace(train_data=exp.train_data.replace(
        is_training=True, drop_remainder=True)).train_data).host_batches(
            process_index=1, process_count=2, num_threads=2)
    for _ in range(3):
      next(training)
    state = json.loads(json.dumps(training.get_state()))
    expected = next(training)
    resumed = task.data_loader(exp.replace(train_data=exp.train_data.replace(
        is_training=True, drop_remainder=True)).train_data).host_batches(
            process_index=1, process_count=2)
    resumed.set_state(state)
    got = next(resumed)
    found[case] = {"restored": all(np.array_equal(got[k], expected[k]) for k in expected),
                   "rows": int(len(expected[next(iter(expected))]))}
  pretraining = experiment(host_input_helpers.dynamic_masking_experiment(files))
  masked = base.get_task(pretraining).data_loader(pretraining.train_data).host_batches(
      num_threads=0)
  for i in range(BATCHES):
    for key, value in next(masked).items():
      arrays[f"dynamic_masking/{i}/{key}"] = value
  sentence = experiment(host_input_helpers.task_experiments(files)["sentence"])
  found["tsv"] = error_of(lambda: base.get_task(sentence).data_loader(
      sentence.train_data.replace(format="tsv", is_training=True)).host_batches())
  found["converted"], arrays["converted/logits"] = convert_and_restore(
      files["hf_folder"], files["token_ids"], os.path.join(out_dir, "converted"))
  found["tensorflow"] = sys.modules["tensorflow"] is None
  np.savez(os.path.join(out_dir, "batches.npz"), **arrays)
  print(json.dumps(found))


if __name__ == "__main__":
  main()
