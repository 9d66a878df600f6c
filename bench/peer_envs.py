"""The peers' virtual environments: which packages each gets, creating them, and the
environment a peer worker runs with.

Each peer (Model Garden, KerasHub, Hugging Face transformers) runs in its own virtual
environment under --venv_root, so that its framework versions are its own.
"""

import os
import subprocess
import sys
from typing import Dict, List, Optional, Sequence

from bert_tf import cpu_kernels

DEFAULT_VENV_ROOT = os.environ.get("BERT_TF_PEER_VENVS", "/tmp/peer_venvs")

# Each peer's virtual environment: packages installed in this order (torch first, with
# the exact CPU version, so that nothing later pulls a CUDA build).
PEER_PACKAGES = {
    "model_garden": [["tf-models-official==2.20.0", "tf_keras"]],
    "keras_hub": [["keras-hub", "tensorflow==2.21.0"]],
    "hf": [["torch==2.13.0"], ["transformers"]],
    # The CPU serving stacks: each exports the Hugging Face model itself (torch.onnx, or
    # OpenVINO's converter of the torch model), as their users do.
    "onnxruntime": [["torch==2.13.0"], ["transformers", "onnx", "onnxscript", "onnxruntime"]],
    "openvino": [["torch==2.13.0"], ["transformers", "openvino", "nncf"]],
}
PEER_LABELS = {
    "ours": "bert_tf",
    "baseline": "bert_tf, --baseline checkout",
    "model_garden": "Model Garden",
    "keras_hub": "KerasHub",
    "hf": "HF transformers",
    "onnxruntime": "ONNX Runtime",
    "openvino": "OpenVINO",
}


def peer_env(onednn: bool = True) -> Dict[str, Optional[str]]:
  """Environment entries for a peer worker: oneDNN on, as for ours (the TensorFlow
  peers' best CPU setting on CPUs where TensorFlow leaves it off), or with
  onednn=False TensorFlow's own default (the variable unset, as a peer's user gets it)."""
  return {cpu_kernels.ONEDNN_VARIABLE: "1" if onednn else None}


def peer_python(peer: str, venv_root: str = DEFAULT_VENV_ROOT) -> str:
  """The Python of `peer`'s virtual environment under `venv_root`."""
  return os.path.join(venv_root, peer, "bin", "python")


def install_peers(peers: Sequence[str], venv_root: str = DEFAULT_VENV_ROOT) -> None:
  """Creates (or completes) one virtual environment per peer under venv_root."""
  for peer in peers:
    if peer not in PEER_PACKAGES:
      raise ValueError(f"Unknown peer '{peer}'; peers: {', '.join(PEER_PACKAGES)}")
    venv = os.path.join(venv_root, peer)
    if not os.path.exists(peer_python(peer, venv_root)):
      print(f"[install] creating {venv}", flush=True)
      subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    for group in PEER_PACKAGES[peer]:
      print(f"[install] {peer}: pip install {' '.join(group)}", flush=True)
      subprocess.run([peer_python(peer, venv_root), "-m", "pip", "install", "-q", *group],
                     check=True)


def check_peers(peers: Sequence[str], venv_root: str) -> None:
  """Exits naming the peers whose virtual environment is missing."""
  missing = [p for p in peers if p != "ours" and not os.path.exists(peer_python(p, venv_root))]
  if missing:
    raise SystemExit(f"No virtual environment for {', '.join(missing)} under {venv_root}; "
                     f"run again with --install_peers (or --venv_root=DIR).")


def ready_peers(peer_flag: Sequence[str], install: bool, venv_root: str) -> List[str]:
  """The peers named by a --peers flag, their venvs created first when `install`."""
  peers = [p for p in peer_flag if p]
  if install:
    install_peers(peers, venv_root)
  check_peers(peers, venv_root)
  return peers
