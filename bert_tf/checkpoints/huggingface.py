"""Reads and writes Hugging Face BERT checkpoints without PyTorch.

A Hugging Face BERT folder holds `config.json`, the weights (`model.safetensors`, a sharded
`model.safetensors.index.json`, or the older `pytorch_model.bin`) and `vocab.txt`, and
where its tokenizer was saved, `tokenizer_config.json` (whose `do_lower_case` we read).
Safetensors files are read into NumPy with the `safetensors` package; `pytorch_model.bin`
needs torch and is loaded with `weights_only=True`, so no arbitrary object is unpickled.
The folder may be remote (bert_tf.utils.files): both libraries read local files only, so
a remote weights file is read from a local copy, one file at a time.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional

import numpy as np

from bert_tf.checkpoints.files import (ConversionError, HUGGINGFACE, RawCheckpoint, VOCAB_FILE,
                                      read_json)
from bert_tf.utils import files as files_lib
from bert_tf.utils import optional

CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX_FILE = "model.safetensors.index.json"
PYTORCH_FILE = "pytorch_model.bin"
WEIGHT_FILES = (SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE, PYTORCH_FILE)
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"


def is_huggingface_folder(path: str) -> bool:
  """Whether `path` (local or remote) is a folder with config.json and a weights file."""
  return files_lib.isdir(path) and files_lib.is_file(os.path.join(path, CONFIG_FILE)) and any(
      files_lib.is_file(os.path.join(path, name)) for name in WEIGHT_FILES)


def read_huggingface(path: str, config_file: Optional[str] = None,
                     vocab_file: Optional[str] = None) -> RawCheckpoint:
  """Reads a Hugging Face BERT checkpoint's arrays.

  Args:
    path: the model folder, or one weights file in it (`.safetensors` or `.bin`); local
      or remote.
    config_file: config.json; default: the one in the folder.
    vocab_file: vocab.txt; default: the one in the folder, if any.

  Returns:
    A RawCheckpoint keyed by the tensor names in the file, as stored (torch layout),
    floating-point tensors as float32.
  """
  if files_lib.isdir(path):
    folder = path
    weights_file = next((os.path.join(path, name) for name in WEIGHT_FILES
                         if files_lib.is_file(os.path.join(path, name))), None)
    if weights_file is None:
      raise ConversionError(f"No weights in {path}: expected one of {', '.join(WEIGHT_FILES)}")
  elif files_lib.is_file(path):
    folder, weights_file = os.path.dirname(files_lib.absolute_path(path)), path
  else:
    raise ConversionError(f"Hugging Face checkpoint not found: {path}")

  if weights_file.endswith(".index.json"):
    weights = _read_sharded_safetensors(weights_file)
  elif weights_file.endswith(".safetensors"):
    weights = _read_safetensors(weights_file)
  else:
    weights = _read_pytorch(weights_file)

  config_file = config_file or os.path.join(folder, CONFIG_FILE)
  if not files_lib.is_file(config_file):
    raise ConversionError(f"No {CONFIG_FILE} beside {weights_file}; pass the config file.")
  config = read_json(config_file)
  _check_architecture(config, config_file)
  if vocab_file is None and files_lib.is_file(os.path.join(folder, VOCAB_FILE)):
    vocab_file = os.path.join(folder, VOCAB_FILE)
  classes = config.get("architectures") or [None]
  return RawCheckpoint(HUGGINGFACE, weights, config, vocab_file, weights_file,
                       architecture=classes[0], lower_case=_lower_case(folder))


def _lower_case(folder: str) -> Optional[bool]:
  """`do_lower_case` of the folder's tokenizer_config.json, None without one."""
  path = os.path.join(folder, TOKENIZER_CONFIG_FILE)
  if not files_lib.is_file(path):
    return None
  value = read_json(path).get("do_lower_case")
  return value if isinstance(value, bool) else None


def _check_architecture(config: Dict[str, Any], config_file: str) -> None:
  """Rejects models that share BERT's tensor names but not its computation."""
  model_type = config.get("model_type", "bert")
  if model_type != "bert":
    raise ConversionError(f"{config_file}: model_type is '{model_type}'; only 'bert' "
                          "checkpoints can be converted.")
  position_type = config.get("position_embedding_type", "absolute")
  if position_type != "absolute":
    raise ConversionError(f"{config_file}: position_embedding_type '{position_type}' is not "
                          "supported; bert_tf uses absolute position embeddings.")


def _as_float32(name: str, array: np.ndarray, source: str) -> np.ndarray:
  if np.issubdtype(array.dtype, np.floating):
    return array.astype(np.float32, copy=False)
  if np.issubdtype(array.dtype, np.integer):
    return array
  raise ConversionError(f"{source}: tensor {name} has unsupported dtype {array.dtype}")


def _read_safetensors(path: str) -> Dict[str, np.ndarray]:
  load_file = optional.module("safetensors.numpy", f"Reading {path}",
                              optional.extra_install("hf")).load_file
  with files_lib.staged_input(path) as local:
    try:
      tensors = load_file(local)
    except Exception as e:  # pylint: disable=broad-except
      # NumPy has no bfloat16, so such files are among the ones that fail here.
      raise ConversionError(f"Cannot read {path} with safetensors.numpy: {e}") from None
  return {name: _as_float32(name, array, path) for name, array in tensors.items()}


def _read_sharded_safetensors(index_file: str) -> Dict[str, np.ndarray]:
  weight_map = read_json(index_file).get("weight_map")
  if not isinstance(weight_map, dict):
    raise ConversionError(f"{index_file} has no 'weight_map'")
  folder = os.path.dirname(files_lib.absolute_path(index_file))
  weights = {}
  for shard in sorted(set(weight_map.values())):
    weights.update(_read_safetensors(os.path.join(folder, shard)))
  return weights


def _read_pytorch(path: str) -> Dict[str, np.ndarray]:
  try:
    import torch  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise ConversionError(f"Reading {path} needs torch, which is not installed. Install "
                          "torch, or convert the file to model.safetensors.") from None
  with files_lib.staged_input(path) as local:
    try:
      state = torch.load(local, map_location="cpu", weights_only=True)
    except Exception as e:  # pylint: disable=broad-except
      raise ConversionError(f"Cannot load {path} with torch.load(weights_only=True): {e}"
                            ) from None
  if not isinstance(state, dict):
    raise ConversionError(f"{path} does not hold a state dict of tensors")
  out = {}
  for name, tensor in state.items():
    if tensor.is_floating_point():
      tensor = tensor.to(torch.float32)
    out[name] = tensor.detach().cpu().numpy()
  return out


def write_huggingface(weights: Dict[str, np.ndarray], config: Dict[str, Any],
                      folder: str) -> None:
  """Writes `config.json` and `model.safetensors` into an existing folder.

  Args:
    weights: {Hugging Face tensor name: array in torch layout}.
    config: the config.json fields.
    folder: where to write.
  """
  save_file = optional.module("safetensors.numpy", "Writing a Hugging Face checkpoint",
                              optional.extra_install("hf")).save_file
  # transformers refuses safetensors files whose metadata does not name a framework.
  path = os.path.join(folder, SAFETENSORS_FILE)
  save_file({name: np.ascontiguousarray(array) for name, array in weights.items()}, path,
            metadata={"format": "pt"})
  os.chmod(path, 0o644)  # safetensors creates the file private to its owner.
  _write_json(config, os.path.join(folder, CONFIG_FILE))


def write_tokenizer_config(lower_case: bool, folder: str) -> None:
  """Writes the tokenizer_config.json with which transformers' AutoTokenizer reads the
  folder's vocab.txt as a BertTokenizer of that case."""
  _write_json({"tokenizer_class": "BertTokenizer", "do_lower_case": lower_case},
              os.path.join(folder, TOKENIZER_CONFIG_FILE))


def _write_json(data: Dict[str, Any], path: str) -> None:
  with open(path, "w", encoding="utf-8") as f:
    json.dump(data, f, indent=2, sort_keys=True)
    f.write("\n")
