r"""Writes a TF Serving REST predict body for one signature of a bert_tf export.

  python3 tools/make_serving_request.py --signature=serving_default --format=instances \
      --text="the cat sat on the [MASK] ." --text="hello [MASK] !" --output=request.json
  curl -d @request.json http://localhost:8501/v1/models/bert:predict

Texts go in as the raw-text inputs (--text, --text_b, --question, --context; repeat a
flag for a batch). serving_default sends them as JSON strings; serve_examples sends
serialized tf.Examples as {"b64": ...}; serve_token_ids tokenizes them here with
--vocab_file (the same tokenizer as the export) and sends the int32 id matrices.
--format picks the row ("instances") or columnar ("inputs") layout.

`pip install .` installs this tool as the command `bert-tf-make-serving-request` (same flags).
"""

import json
import sys

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

FLAGS = flags.FLAGS
flags.DEFINE_enum("signature", "serving_default",
                  ["serving_default", "serve_token_ids", "serve_examples"],
                  "The signature the request targets.")
flags.DEFINE_enum("format", "instances", ["instances", "inputs"],
                  "REST layout: row (instances) or columnar (inputs).")
flags.DEFINE_multi_string("text", [], "A text (repeat for a batch).")
flags.DEFINE_multi_string("text_b", [], "Second texts of pair classifiers.")
flags.DEFINE_multi_string("question", [], "SQuAD questions.")
flags.DEFINE_multi_string("context", [], "SQuAD contexts.")
flags.DEFINE_string("vocab_file", None, "Vocab for serve_token_ids (tokenizing client-side).")
flags.DEFINE_bool("lower_case", True, "Whether the vocab is uncased (serve_token_ids).")
flags.DEFINE_integer("seq_length", 128, "Packed length for serve_token_ids.")
flags.DEFINE_bool("mask_tokens", True, "serve_token_ids: a literal [MASK] in --text becomes "
                  "the [MASK] token, as the fill-mask export's raw-text signature does.")
flags.DEFINE_string("output", None, "Output JSON file; default stdout.")


def main(argv):
  del argv
  from bert_tf.export import rest_request  # pylint: disable=g-import-not-at-top
  texts = {name: values for name, values in (
      ("text", FLAGS.text), ("text_b", FLAGS.text_b), ("question", FLAGS.question),
      ("context", FLAGS.context)) if values}
  if not texts:
    raise app.UsageError("Give at least one --text (or --question and --context)")
  text_encoder = None
  if FLAGS.signature == "serve_token_ids":
    if not FLAGS.vocab_file:
      raise app.UsageError("--signature=serve_token_ids needs --vocab_file")
    from bert_tf.export import text_encoding  # pylint: disable=g-import-not-at-top
    from bert_tf.text.tokenizer import BertWordPieceTokenizer  # pylint: disable=g-import-not-at-top
    text_encoder = text_encoding.TextEncoder(
        BertWordPieceTokenizer(FLAGS.vocab_file, lower_case=FLAGS.lower_case), FLAGS.seq_length)
  if text_encoder is not None and FLAGS.mask_tokens and list(texts) == ["text"]:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    ids = text_encoder.encode_with_masks(tf.constant(texts["text"]))
    columns = {name: value.numpy().tolist() for name, value in ids.items()}
  else:
    columns = rest_request.signature_columns(FLAGS.signature, texts, text_encoder)
  body = rest_request.make_body(columns, FLAGS.format, FLAGS.signature)
  count = len(next(iter(columns.values())))
  if FLAGS.output:
    rest_request.write_body(body, FLAGS.output)
    where = FLAGS.output
  else:
    json.dump(body, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")
    where = "stdout"
  print(f"Wrote a {FLAGS.format} body for {FLAGS.signature} with {count} example(s), inputs "
        f"{sorted(columns)}, to {where}", file=sys.stderr)


def run():
  """The `bert-tf-make-serving-request` command."""
  errors.run_tool("make_serving_request", main, needs=optional.tensorflow_for_tools)


if __name__ == "__main__":
  run()
