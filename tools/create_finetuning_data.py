r"""Turns fine-tuning task files (GLUE TSV, generic TSV/CSV, CoNLL, SWAG CSV, TFDS GLUE)
into TFRecords that tools/train.py reads with `format: tfrecord`.

The experiment config says how to read the files: its task section (e.g.
task.glue_task=mrpc, task.label_names), its tokenizer section (vocab_file, lower_case)
and its train_data or eval_data section (input_path, format, seq_length), chosen by
--split.

  python tools/create_finetuning_data.py --experiment=glue_mrpc --split=train \
    --params_override=train_data.input_path=glue/MRPC/train.tsv,tokenizer.vocab_file=vocab.txt \
    --output=data/mrpc_train.tfrecord

writes data/mrpc_train.tfrecord (features input_ids, input_mask, segment_ids padded to
seq_length, label_ids, example_index) and data/mrpc_train.tfrecord.json (example count,
label names, settings). The file is written under a temporary name and renamed when
complete. Point train_data.input_path at it with train_data.format=tfrecord.

`pip install .` installs this tool as the command `bert-tf-create-finetuning-data` (same flags).
"""

import time

from absl import app
from absl import flags

from bert_tf import cpu_kernels

# Before TensorFlow loads: it reads its CPU kernels, device kinds and log level once,
# when imported.
cpu_kernels.prefer_onednn()
cpu_kernels.leave_out_absent_gpus()
cpu_kernels.quiet_startup_logs()

from bert_tf.utils import errors
from bert_tf.utils import optional
from bert_tf.training import experiments

_EXPERIMENT = flags.DEFINE_string(
    "experiment", None, "A registered experiment (file stem in official_configs/experiments/, "
    "e.g. glue_mrpc, conll2003_ner, swag) or a YAML path.")
_CONFIG_FILE = flags.DEFINE_multi_string("config_file", [], "YAML config file(s), merged in "
                                         "order after --experiment.")
_PARAMS_OVERRIDE = flags.DEFINE_string(
    "params_override", None, "Comma-separated dotted overrides, e.g. "
    "'train_data.input_path=train.tsv,tokenizer.vocab_file=vocab.txt'.")
_SPLIT = flags.DEFINE_enum("split", "train", ["train", "eval"],
                           "Which data section of the config to convert: train_data or "
                           "eval_data.")
_OUTPUT = flags.DEFINE_string("output", None, "The TFRecord file to write.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  if not _OUTPUT.value:
    raise app.UsageError("--output is required")
  config = experiments.resolve_experiment(_EXPERIMENT.value, _CONFIG_FILE.value,
                                          _PARAMS_OVERRIDE.value)
  from bert_tf.data.pipelines.loaders import features  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import base  # pylint: disable=g-import-not-at-top
  task = base.get_task(config)
  if not isinstance(features.registry.get_kind(task.record_kind), features.FeatureKind):
    raise app.UsageError(f"Task '{task.name}' has no fine-tuning TFRecords to write")
  data_config = config.train_data if _SPLIT.value == "train" else config.eval_data
  start = time.time()
  meta = features.write_tfrecord(task.data_loader(data_config), _OUTPUT.value)
  print(f"Wrote {meta['num_examples']} {task.name} examples (seq_length {meta['seq_length']}) "
        f"to {_OUTPUT.value} in {time.time() - start:.1f}s; metadata in {_OUTPUT.value}.json",
        flush=True)


def run():
  """The `bert-tf-create-finetuning-data` command."""
  errors.run_tool("create_finetuning_data", main, needs=optional.tensorflow_for_tools)


if __name__ == "__main__":
  run()
