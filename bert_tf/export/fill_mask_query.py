"""Queries an exported fill-mask SavedModel, needing only tensorflow and tensorflow_text.

Run as a script in a fresh process (it imports nothing from bert_tf):

  python bert_tf/export/fill_mask_query.py EXPORT_DIR "the cat sat on the [MASK] ."

prints one JSON object per sentence: {"text", "masks": [[[token, probability], ...], ...]},
the top-k candidates of each [MASK], most probable first.
"""

import json
import os
import sys


def query(export_dir, sentences):
  """Calls the export's serving_default on sentences.

  Args:
    export_dir: a fill-mask SavedModel version directory.
    sentences: list of str, each with one or more "[MASK]".

  Returns:
    A list with, per sentence, {"text": str, "masks": [[(token, probability), ...]
    per [MASK]]}.
  """
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import  # registers ops
  serve = tf.saved_model.load(export_dir).signatures["serving_default"]
  out = serve(text=tf.constant(list(sentences), tf.string))
  counts = out["mask_count"].numpy()
  tokens = out["top_k_tokens"].numpy()
  probabilities = out["top_k_probabilities"].numpy()
  results = []
  for i, sentence in enumerate(sentences):
    masks = []
    for m in range(int(counts[i])):
      masks.append([(t.decode("utf-8"), float(p)) for t, p in zip(tokens[i, m],
                                                                   probabilities[i, m])])
    results.append({"text": sentence, "masks": masks})
  return results


def main(argv):
  if len(argv) < 3 or argv[1] in ("-h", "--help"):
    print(__doc__)
    return 0 if len(argv) > 1 and argv[1] in ("-h", "--help") else 2
  for result in query(argv[1], argv[2:]):
    print(json.dumps(result, ensure_ascii=False))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
