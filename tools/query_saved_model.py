r"""Asks an exported SavedModel a question from the shell and prints its answer.

  python3 tools/query_saved_model.py exports/bert "the cat sat on the [MASK] ."
  python3 tools/query_saved_model.py exports/mnli "A man plays." "Nobody plays."
  python3 tools/query_saved_model.py --json exports/squad "Where?" "John lives in Paris."

The first argument is the export: a version directory, an export base (its newest
version is asked) or a TF Hub-style pair's directory (preprocessor/ and encoder/). The
texts after it are the questions, each as many texts as the export's raw-text inputs,
in order: one text (fill-mask, classifier, tagging, encoder), a text pair (pair
classifier), question then context (SQuAD), context then each ending (multiple choice);
several questions are asked as one batch. The kind of export is read from its
serving_default signature. Each answer is printed as readable lines, or with --json as
one JSON object per question.

`pip install .` installs this tool as the command `bert-tf-query` (same flags).
"""

import json

from absl import app
from absl import flags

from bert_tf import cpu_kernels
from bert_tf.utils import errors
from bert_tf.utils import optional

# Before TensorFlow loads: it reads its CPU kernels, device kinds and log level once,
# when imported.
cpu_kernels.prefer_onednn()
cpu_kernels.leave_out_absent_gpus()
# Errors too: on CPUs without AVX-512 oneDNN logs one for each int64 op it leaves to
# Eigen, amid the answers.
cpu_kernels.quiet_startup_logs(level=cpu_kernels.SILENT_LOG_LEVEL)

FLAGS = flags.FLAGS
flags.DEFINE_bool("json", False, "Print one JSON object per question instead of text.")


def main(argv):
  if len(argv) < 2:
    raise app.UsageError("Give the export directory, then the texts of a question")
  from bert_tf.export import query  # pylint: disable=g-import-not-at-top
  export = query.load(argv[1])
  for answer in query.ask(export, argv[2:]):
    if FLAGS.json:
      print(json.dumps(answer, ensure_ascii=False))
    else:
      print("\n".join(query.describe(answer)))


def run():
  """The `bert-tf-query` command."""
  errors.run_tool("query_saved_model", main, needs=optional.tensorflow_for_tools)


if __name__ == "__main__":
  run()
