"""int8_onednn's product is exact on CPUs without VNNI: oneDNN limited to AVX2
(ONEDNN_MAX_CPU_ISA) sums u8 x s8 pairs in int16 with saturation, which the kernels'
range [-63, 63] never reaches while Keras's [-127, 127] does."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_PROBE = """
import json
import numpy as np
import tensorflow as tf
from bert_tf.export import int8_onednn

def product(kernel):
  # Rows at their largest (u8 255 after scaling) against kernels at the range's ends.
  x = np.ones((2, 64), np.float32)
  scale = np.ones(kernel.shape[1], np.float32)
  sums = kernel.astype(np.float32).sum(axis=0)
  got = int8_onednn.int8_product(tf.constant(x), tf.constant(kernel), tf.constant(scale),
                                 tf.constant(sums)).numpy()
  return float(got[0, 0]), float(x[0] @ kernel[:, 0])

top = int8_onednn.KERNEL_RANGE[1]
print(json.dumps({"in_range": product(np.full((64, 3), top, np.int8)),
                  "keras_range": product(np.full((64, 3), 127, np.int8))}))
"""


@pytest.mark.parametrize("isa", ["AVX2", "AVX512_CORE"])
def test_product_is_exact_where_onednn_has_no_vnni(isa):
  env = {**os.environ, "ONEDNN_MAX_CPU_ISA": isa, "TF_ENABLE_ONEDNN_OPTS": "1",
         "PYTHONPATH": ROOT}
  process = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                           timeout=300, check=False, env=env)
  assert process.returncode == 0, process.stderr[-3000:]
  result = json.loads(process.stdout.strip().splitlines()[-1])
  got, want = result["in_range"]
  assert abs(got - want) <= 1e-3 * abs(want)
  # The same product with Keras's kernel range saturates there: the limit is real.
  got, want = result["keras_range"]
  assert got < 0.6 * want
