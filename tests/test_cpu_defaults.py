"""bert_tf's choice of TensorFlow CPU kernels (bert_tf/__init__.py), each case in a fresh
interpreter, since TensorFlow reads TF_ENABLE_ONEDNN_OPTS once, when first imported."""

import json
import os
import platform
import subprocess
import sys

import pytest

import bert_tf

pytestmark = pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"),
    reason="bert_tf sets TensorFlow's oneDNN default on x86-64 only")

_REPORT = """
import json, os, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
{imports}
from tensorflow.python.util import _pywrap_util_port
print(json.dumps({{
    "variable": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
    "onednn": _pywrap_util_port.IsMklEnabled(),
    "warnings": [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)],
}}))
"""


def _run(imports, variable=None):
  env = {k: v for k, v in os.environ.items() if k != bert_tf.ONEDNN_VARIABLE}
  if variable is not None:
    env[bert_tf.ONEDNN_VARIABLE] = variable
  env["TF_CPP_MIN_LOG_LEVEL"] = "3"
  body = "\n".join(f"  import {name}" for name in imports)
  out = subprocess.run([sys.executable, "-c", _REPORT.format(imports=body)], env=env,
                       capture_output=True, text=True, check=True, timeout=300)
  return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_bert_tf_first_turns_onednn_on():
  report = _run(["bert_tf", "tensorflow"])
  assert report == {"variable": "1", "onednn": True, "warnings": []}


def test_an_explicit_choice_is_kept():
  report = _run(["bert_tf", "tensorflow"], variable="0")
  assert report == {"variable": "0", "onednn": False, "warnings": []}


def test_tensorflow_imported_first_keeps_its_choice_and_warns_only_if_onednn_is_off():
  report = _run(["tensorflow", "bert_tf"])
  assert report["variable"] is None
  if report["onednn"]:  # TensorFlow's own default on CPUs with AVX-512 VNNI/BF16 or AMX.
    assert report["warnings"] == []
  else:
    assert len(report["warnings"]) == 1
    assert "TF_ENABLE_ONEDNN_OPTS=1" in report["warnings"][0]
