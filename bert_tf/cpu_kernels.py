"""The CPU kernels TensorFlow runs: its oneDNN kernels, where it leaves them off.

TensorFlow turns its oneDNN CPU kernels on by itself only on x86-64 CPUs with AVX-512
VNNI/BF16 or AMX; on other x86-64 CPUs (AVX2, for example AMD Zen 3) BERT trains
faster with them. TensorFlow reads `TF_ENABLE_ONEDNN_OPTS` once, when it is first
imported, so the choice is made before that: the tools (tools/*.py) call
`prefer_onednn` first thing. Importing bert_tf changes nothing in the environment.
Setting the variable yourself (`TF_ENABLE_ONEDNN_OPTS=0` keeps the kernels off) wins.

This module imports nothing heavy, so that it can run before TensorFlow loads.
"""

import os
import platform
import sys
from typing import MutableMapping, Optional
import warnings

ONEDNN_VARIABLE = "TF_ENABLE_ONEDNN_OPTS"


def prefer_onednn(env: Optional[MutableMapping[str, str]] = None) -> bool:
  """Sets TF_ENABLE_ONEDNN_OPTS=1 in `env` (default os.environ) on x86-64, unless the
  variable is already set either way.

  Returns:
    Whether it set the variable. It warns when it sets it in os.environ after
    TensorFlow was imported: this process keeps TensorFlow's choice, only processes it
    starts get the new one.
  """
  env = os.environ if env is None else env
  if platform.machine().lower() not in ("x86_64", "amd64") or ONEDNN_VARIABLE in env:
    return False
  env[ONEDNN_VARIABLE] = "1"
  if env is os.environ and "tensorflow" in sys.modules:
    warnings.warn(f"{ONEDNN_VARIABLE}=1 was set after TensorFlow was imported; it applies "
                  "to child processes only. Call bert_tf.cpu_kernels.prefer_onednn "
                  "before importing TensorFlow.", RuntimeWarning, stacklevel=2)
  return True
