"""Run as a script with TensorFlow made unimportable (KERAS_BACKEND=jax or torch): asks
each folder of CASES_JSON ({case: {"path", "rows"}}) its rows through
bert_tf.inference.load, two rows a batch, writes every output to OUT_DIR/<case>.npz
(strings as unicode arrays), and prints one JSON line: whether TensorFlow stayed out,
the Keras backend and each case's kind (tests/inference/test_predictor_jax.py). A case
with "convert" instead of "path" is that checkpoint (a KerasHub preset, a Hugging Face
folder) converted here first into OUT_DIR/<case>.

  python tests/inference_tf_free_check.py CASES_JSON OUT_DIR
"""

import json
import os
import sys

sys.modules["tensorflow"] = None  # any import of TensorFlow now fails

import keras  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

from bert_tf import inference  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf.checkpoints import convert  # pylint: disable=g-import-not-at-top,wrong-import-position


def main():
  with open(sys.argv[1], encoding="utf-8") as f:
    cases = json.load(f)
  found = {"kinds": {}}
  for case, spec in cases.items():
    if "convert" in spec:
      spec["path"] = os.path.join(sys.argv[2], case)
      convert.convert_checkpoint(spec["convert"], spec["path"])
    out = inference.load(spec["path"]).predict(spec["rows"], batch_size=2)
    found["kinds"][case] = out.kind
    np.savez(os.path.join(sys.argv[2], f"{case}.npz"), **{
        name: np.asarray(value.tolist(), str) if value.dtype == object else value
        for name, value in out.outputs.items()})
  found["tensorflow_absent"] = sys.modules["tensorflow"] is None
  found["backend"] = keras.backend.backend()
  print(json.dumps(found))


if __name__ == "__main__":
  main()
