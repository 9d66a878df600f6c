"""bert_tf: BERT for TensorFlow 2 and Keras 3, from raw text to served models.

Importing bert_tf before TensorFlow turns on TensorFlow's oneDNN CPU kernels on x86-64
(`TF_ENABLE_ONEDNN_OPTS=1`, unless that variable is already set either way). TensorFlow
turns them on by itself only on CPUs with AVX-512 VNNI/BF16 or AMX; on other x86-64 CPUs
(AVX2, for example AMD Zen 3) the BERT-base pretraining step runs 1.5x faster with them
(bench/README.md, "oneDNN on CPUs without AVX-512"). TensorFlow reads the variable once,
when it is first imported: imported before bert_tf, it keeps its own choice, and bert_tf
says so in a warning.
"""

import os
import platform
import sys
import warnings

__version__ = "0.1.0"

ONEDNN_VARIABLE = "TF_ENABLE_ONEDNN_OPTS"


def _prefer_onednn_kernels() -> None:
  if platform.machine().lower() not in ("x86_64", "amd64"):
    return
  if ONEDNN_VARIABLE in os.environ:
    return  # The user's choice, either way.
  if "tensorflow" not in sys.modules:
    os.environ[ONEDNN_VARIABLE] = "1"
    return
  from tensorflow.python.util import _pywrap_util_port  # pylint: disable=g-import-not-at-top
  if not _pywrap_util_port.IsMklEnabled():
    warnings.warn(
        "TensorFlow was imported before bert_tf with its oneDNN CPU kernels off; training "
        f"on this CPU is faster with them. Set {ONEDNN_VARIABLE}=1 (or import bert_tf "
        f"first), or {ONEDNN_VARIABLE}=0 to keep them off and silence this warning.",
        RuntimeWarning, stacklevel=3)


_prefer_onednn_kernels()
