"""Writes per-token vectors of chosen BERT layers for each line of a text file.

The paper's feature-based approach: each line is one text or a pair "A ||| B"; the
output has one JSON object per line with, for every token ([CLS] and [SEP] included),
the vectors of the layers in --layers (-1 is the last layer), or with --concat_layers
one vector joining them in that order.

  python tools/extract_features.py --input_file=input.txt --output_file=features.jsonl \\
    --init_checkpoint=runs/base --layers=-1,-2,-3,-4 --seq_length=128

--init_checkpoint is a bert_tf checkpoint holding an `encoder`: a training's model_dir
(a pretraining run) or a converted folder, whose params.yaml (or config.yaml) describes
the encoder and names its vocab and case, as the exporter and the converter read them;
--vocab_file and --lower_case replace the folder's. Otherwise the encoder is described
by --bert_config_file (the original release's bert_config.json, or a Hugging Face
config.json) or by --encoder_size (tiny ... large), with --vocab_file; without
--init_checkpoint, the weights are freshly initialized (only useful for testing the
pipeline).

`pip install .` installs this tool as the command `bert-tf-extract-features` (same flags).
"""


from absl import app
from absl import flags

from bert_tf import cpu_kernels
from bert_tf.utils import errors
from bert_tf.utils import optional

# Before TensorFlow loads: it reads its CPU kernels, device kinds and log level once,
# when imported.
cpu_kernels.prefer_onednn()
cpu_kernels.leave_out_absent_gpus()
cpu_kernels.quiet_startup_logs()

_INPUT = flags.DEFINE_string("input_file", None, "UTF-8 text, one text or 'A ||| B' per line.")
_OUTPUT = flags.DEFINE_string("output_file", None, "JSON lines output (written atomically).")
_VOCAB = flags.DEFINE_string("vocab_file", None, "The encoder's vocab.txt; default the "
                             "--init_checkpoint folder's.")
_LOWER = flags.DEFINE_bool("lower_case", True, "Whether the vocab is uncased; default the "
                           "--init_checkpoint folder's where it says, else true.")
# The original release's extract_features.py names.
flags.DEFINE_alias("do_lower_case", "lower_case")
_BERT_CONFIG = flags.DEFINE_string("bert_config_file", None,
                                   "bert_config.json (or a Hugging Face config.json); "
                                   "default the --init_checkpoint folder's config.")
_SIZE = flags.DEFINE_string("encoder_size", None,
                            "Instead of --bert_config_file: tiny, mini, small, medium, base, "
                            "large (with the vocab's size).")
_INIT = flags.DEFINE_string("init_checkpoint", "", "bert_tf checkpoint with an `encoder`: "
                            "a training's model_dir or a converted folder (or a checkpoint "
                            "in one).")
_LAYERS = flags.DEFINE_string("layers", "-1,-2,-3,-4",
                              "Comma-separated layer indexes; -1 is the last layer.")
_CONCAT = flags.DEFINE_bool("concat_layers", False,
                            "Write one vector per token: the layers concatenated.")
_SEQ = flags.DEFINE_integer("seq_length", 128, "Tokens per line, special ones included.")
flags.DEFINE_alias("max_seq_length", "seq_length")
_BATCH = flags.DEFINE_integer("batch_size", 8, "Lines per encoder call.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  for flag in (_INPUT, _OUTPUT):
    if not flag.value:
      raise app.UsageError(f"--{flag.name} is required")
  if _BERT_CONFIG.value and _SIZE.value:
    raise app.UsageError("Give at most one of --bert_config_file and --encoder_size")
  from_folder = not (_BERT_CONFIG.value or _SIZE.value)
  if from_folder and not _INIT.value:
    raise app.UsageError("Give --init_checkpoint (a training's model_dir or a converted "
                         "folder), or describe the encoder with --bert_config_file or "
                         "--encoder_size")
  if not from_folder and not _VOCAB.value:
    raise app.UsageError("--vocab_file is required with --bert_config_file or "
                         "--encoder_size")
  # Imported after flag parsing so that --help is fast.
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  from bert_tf import feature_extraction  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import bert_config  # pylint: disable=g-import-not-at-top
  from bert_tf.text.tokenizer import BertWordPieceTokenizer  # pylint: disable=g-import-not-at-top
  from bert_tf.utils import files  # pylint: disable=g-import-not-at-top

  layers = feature_extraction.parse_layers(_LAYERS.value)
  lower_case = _LOWER.value
  if from_folder:
    encoder, vocab_file, folder_case = feature_extraction.encoder_from_folder(
        _INIT.value, _VOCAB.value)
    if folder_case is not None and not _LOWER.present:
      lower_case = folder_case
  else:
    vocab_file = _VOCAB.value
  with files.staged_input(vocab_file) as local_vocab:
    tokenizer = BertWordPieceTokenizer(local_vocab, lower_case=lower_case)
  if not from_folder:
    if _BERT_CONFIG.value:
      encoder_config = bert_config.read_bert_config(_BERT_CONFIG.value)
    else:
      encoder_config = configs.EncoderConfig.from_size(_SIZE.value,
                                                       vocab_size=tokenizer.vocab_size)
    encoder = feature_extraction.load_encoder(encoder_config, _INIT.value)
  summary = feature_extraction.extract_features_to_file(
      _INPUT.value, _OUTPUT.value, encoder, tokenizer, layers=layers,
      seq_length=_SEQ.value, batch_size=_BATCH.value, concat_layers=_CONCAT.value)
  print(f"Wrote features of {summary['num_lines']} lines ({summary['num_tokens']} tokens, "
        f"layers {layers}{' concatenated' if _CONCAT.value else ''}) to {_OUTPUT.value} in "
        f"{summary['seconds']:.1f}s", flush=True)


def run():
  """The `bert-tf-extract-features` command."""
  errors.run_tool("extract_features", main, needs=optional.tensorflow_for_tools)


if __name__ == "__main__":
  run()
